from textkit.util import collapse_whitespace


def same_text(a: str, b: str) -> bool:
    """Equal but for whitespace and case."""
    return collapse_whitespace(a).casefold() == collapse_whitespace(b).casefold()


def diff_words(a: str, b: str) -> set[str]:
    return set(collapse_whitespace(a).split(" ")) ^ set(collapse_whitespace(b).split(" "))
