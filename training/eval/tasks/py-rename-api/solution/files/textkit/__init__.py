from textkit.util import collapse_whitespace

__all__ = ["collapse_whitespace"]
