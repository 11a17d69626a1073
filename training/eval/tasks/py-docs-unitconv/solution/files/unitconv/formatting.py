"""Quantities as text."""

from unitconv.convert import convert


def format_quantity(quantity, precision=2, unit=None):
    """`quantity` as text, converted to `unit` first when that is given, with at most
    `precision` decimals (trailing zeros dropped) and thousands separators."""
    value = quantity.value if unit is None else convert(quantity.value, quantity.unit, unit)
    text = f"{value:,.{precision}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {unit or quantity.unit}"


_LADDERS = {"length": ["mm", "cm", "m", "km"], "time": ["s", "min", "h"], "mass": ["g", "kg"]}


def humanize(quantity, precision=1):
    """`quantity` as text in the largest unit of its dimension in which it is still at
    least 1 (e.g. 5400 s is "1.5 h"), with at most `precision` decimals."""
    ladder = _LADDERS.get(quantity.dimension)
    if not ladder:
        return format_quantity(quantity, precision)
    best = ladder[0]
    for unit in ladder:
        if abs(convert(quantity.value, quantity.unit, unit)) >= 1:
            best = unit
    return format_quantity(quantity, precision, best)
