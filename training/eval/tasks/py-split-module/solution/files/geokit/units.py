"""Length units."""

KM_PER_MILE = 1.609344
KM_PER_NAUTICAL_MILE = 1.852
UNITS = {"km": 1.0, "m": 0.001, "mi": KM_PER_MILE, "nmi": KM_PER_NAUTICAL_MILE}
"""Kilometres in one of each unit."""


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """A length from one unit of UNITS to another."""
    for unit in (from_unit, to_unit):
        if unit not in UNITS:
            raise ValueError(f"unknown unit {unit!r}; use one of {', '.join(UNITS)}")
    return value * UNITS[from_unit] / UNITS[to_unit]


def km_to_miles(km: float) -> float:
    return convert(km, "km", "mi")


def miles_to_km(miles: float) -> float:
    return convert(miles, "mi", "km")
