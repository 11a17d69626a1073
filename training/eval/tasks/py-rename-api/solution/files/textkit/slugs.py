import re

from textkit import util


def slugify(text: str) -> str:
    cleaned = re.sub(r"[^a-z0-9 ]", "", util.collapse_whitespace(text).lower())
    return cleaned.replace(" ", "-")
