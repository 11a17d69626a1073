from textkit.util import normalise_ws


def same_text(a: str, b: str) -> bool:
    """Equal but for whitespace and case."""
    return normalise_ws(a).casefold() == normalise_ws(b).casefold()


def diff_words(a: str, b: str) -> set[str]:
    return set(normalise_ws(a).split(" ")) ^ set(normalise_ws(b).split(" "))
