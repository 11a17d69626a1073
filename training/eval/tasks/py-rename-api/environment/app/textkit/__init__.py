from textkit.util import normalise_ws

__all__ = ["normalise_ws"]
