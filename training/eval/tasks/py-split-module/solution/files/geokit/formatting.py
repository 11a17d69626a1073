"""Writing coordinates and distances."""

from geokit.points import Point, as_point
from geokit.units import convert


def format_dms(value: float, axis: str) -> str:
    """Degrees as 51°30'26.6"N (axis "lat" or "lon")."""
    if axis not in ("lat", "lon"):
        raise ValueError(f"axis must be 'lat' or 'lon', not {axis!r}")
    hemi = ("N" if value >= 0 else "S") if axis == "lat" else ("E" if value >= 0 else "W")
    tenths = round(abs(value) * 36000)
    degrees, rest = divmod(tenths, 36000)
    minutes, rest = divmod(rest, 600)
    return f"{degrees}°{minutes:02d}'{rest / 10:04.1f}\"{hemi}"


def format_point(point: Point, style: str = "decimal", precision: int = 5) -> str:
    """ "51.50740, -0.12780" (decimal) or "51°30'26.6\"N 0°07'40.1\"W" (dms)."""
    point = as_point(point)
    if style == "decimal":
        return f"{point.lat:.{precision}f}, {point.lon:.{precision}f}"
    if style == "dms":
        return f"{format_dms(point.lat, 'lat')} {format_dms(point.lon, 'lon')}"
    raise ValueError(f"unknown style {style!r}")


def format_distance(km: float, unit: str = "km", precision: int = 1) -> str:
    """ "12.3 km", "7.6 mi"; metres are whole ("850 m")."""
    value = convert(km, "km", unit)
    if unit == "m":
        precision = 0
    return f"{value:,.{precision}f} {unit}"
