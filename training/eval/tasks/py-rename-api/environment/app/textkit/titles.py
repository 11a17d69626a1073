from textkit.util import normalise_ws


def title_case(text: str) -> str:
    return " ".join(word.capitalize() for word in normalise_ws(text).split(" "))
