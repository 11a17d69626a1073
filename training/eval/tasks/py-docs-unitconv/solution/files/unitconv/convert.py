"""Conversion of plain numbers between units of the same dimension."""

from unitconv.registry import DEFAULT_REGISTRY


class ConversionError(ValueError):
    """Raised for a conversion between units of different dimensions."""


def convert(value, from_unit, to_unit, registry=DEFAULT_REGISTRY):
    """Convert `value` from `from_unit` to `to_unit` (symbols or aliases looked up in
    `registry`). ConversionError when the units measure different things.

    >>> convert(1.5, "km", "m")
    1500.0
    >>> round(convert(100, "C", "F"), 6)
    212.0
    >>> convert(1, "kg", "m")
    Traceback (most recent call last):
    ...
    unitconv.convert.ConversionError: cannot convert mass (kg) to length (m)
    """
    source, target = registry.get(from_unit), registry.get(to_unit)
    if source.dimension != target.dimension:
        raise ConversionError(f"cannot convert {source.dimension} ({from_unit}) to {target.dimension} ({to_unit})")
    return target.from_base(source.to_base(value))


def convert_many(values, from_unit, to_unit, *, registry=DEFAULT_REGISTRY, ndigits=None):
    """Convert each of `values` from `from_unit` to `to_unit` using `registry`, rounding
    the results to `ndigits` decimals when it is given."""
    out = [convert(v, from_unit, to_unit, registry) for v in values]
    return out if ndigits is None else [round(v, ndigits) for v in out]
