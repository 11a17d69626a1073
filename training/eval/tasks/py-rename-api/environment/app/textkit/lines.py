from textkit.util import normalise_ws


def clean_lines(text: str) -> list[str]:
    """Each line's whitespace collapsed; blank lines dropped."""
    return [normalise_ws(line) for line in text.splitlines() if normalise_ws(line)]
