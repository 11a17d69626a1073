from textkit.util import collapse_whitespace


def title_case(text: str) -> str:
    return " ".join(word.capitalize() for word in collapse_whitespace(text).split(" "))
