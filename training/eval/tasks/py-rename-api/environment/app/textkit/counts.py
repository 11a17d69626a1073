from textkit.util import normalise_ws as squash


def word_count(text: str) -> int:
    squashed = squash(text)
    return len(squashed.split(" ")) if squashed else 0
