from textkit.util import collapse_whitespace


def clean_lines(text: str) -> list[str]:
    """Each line's whitespace collapsed; blank lines dropped."""
    return [collapse_whitespace(line) for line in text.splitlines() if collapse_whitespace(line)]
