import re

_SPACE = re.compile(r"\s+")


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace become one space; the ends are trimmed."""
    return _SPACE.sub(" ", text).strip()
