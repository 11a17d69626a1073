"""Small descriptive statistics over sequences of numbers."""

from statkit.center import mean, median, mode

__all__ = ["mean", "median", "mode"]
