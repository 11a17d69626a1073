import textwrap

import textkit.util


def wrap(text: str, width: int = 40) -> list[str]:
    return textwrap.wrap(textkit.util.normalise_ws(text), width)
