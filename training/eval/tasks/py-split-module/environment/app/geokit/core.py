"""geokit: small geographic helpers for the delivery planner.

Points, units, great-circle distances, bounding boxes, and reading and writing coordinates.
Everything lives in this one module for now.
"""

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

# --- points ---


@dataclass(frozen=True)
class Point:
    """A position in degrees: latitude -90..90, longitude -180..180."""

    lat: float
    lon: float

    def __post_init__(self) -> None:
        if not -90.0 <= self.lat <= 90.0:
            raise ValueError(f"latitude {self.lat} is not between -90 and 90")
        if not -180.0 <= self.lon <= 180.0:
            raise ValueError(f"longitude {self.lon} is not between -180 and 180")

    def __iter__(self):
        yield self.lat
        yield self.lon


def normalize_lon(lon: float) -> float:
    """The longitude wrapped into -180 (inclusive) .. 180 (exclusive)."""
    return (lon + 180.0) % 360.0 - 180.0


def as_point(value: "Point | tuple[float, float] | Mapping[str, float]") -> Point:
    """A Point from a Point, a (lat, lon) pair or a mapping with "lat" and "lon"."""
    if isinstance(value, Point):
        return value
    if isinstance(value, Mapping):
        return Point(float(value["lat"]), float(value["lon"]))
    lat, lon = value
    return Point(float(lat), float(lon))


def _radians(point: Point) -> tuple[float, float]:
    return math.radians(point.lat), math.radians(point.lon)


# --- units ---

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


# --- distance ---

EARTH_RADIUS_KM = 6371.0088
"""The mean radius (IUGG)."""


def haversine(a: Point, b: Point) -> float:
    """The great-circle distance between two points, in km."""
    a, b = as_point(a), as_point(b)
    (lat1, lon1), (lat2, lon2) = _radians(a), _radians(b)
    h = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def initial_bearing(a: Point, b: Point) -> float:
    """The compass bearing to set off on from a towards b, in degrees 0..360."""
    a, b = as_point(a), as_point(b)
    (lat1, lon1), (lat2, lon2) = _radians(a), _radians(b)
    y = math.sin(lon2 - lon1) * math.cos(lat2)
    x = math.cos(lat1) * math.sin(lat2) - math.sin(lat1) * math.cos(lat2) * math.cos(lon2 - lon1)
    return math.degrees(math.atan2(y, x)) % 360.0


def destination(start: Point, bearing: float, distance_km: float) -> Point:
    """Where one ends up going distance_km from start on the given initial bearing."""
    start = as_point(start)
    lat1, lon1 = _radians(start)
    angle = distance_km / EARTH_RADIUS_KM
    theta = math.radians(bearing)
    lat2 = math.asin(
        math.sin(lat1) * math.cos(angle) + math.cos(lat1) * math.sin(angle) * math.cos(theta)
    )
    lon2 = lon1 + math.atan2(
        math.sin(theta) * math.sin(angle) * math.cos(lat1),
        math.cos(angle) - math.sin(lat1) * math.sin(lat2),
    )
    return Point(math.degrees(lat2), normalize_lon(math.degrees(lon2)))


def midpoint(a: Point, b: Point) -> Point:
    """The point halfway along the great circle from a to b."""
    a, b = as_point(a), as_point(b)
    (lat1, lon1), (lat2, lon2) = _radians(a), _radians(b)
    bx = math.cos(lat2) * math.cos(lon2 - lon1)
    by = math.cos(lat2) * math.sin(lon2 - lon1)
    lat = math.atan2(math.sin(lat1) + math.sin(lat2), math.sqrt((math.cos(lat1) + bx) ** 2 + by**2))
    lon = lon1 + math.atan2(by, math.cos(lat1) + bx)
    return Point(math.degrees(lat), normalize_lon(math.degrees(lon)))


def path_length(points: Iterable[Point]) -> float:
    """The length of a path through the points in order, in km (0 for fewer than two)."""
    points = [as_point(p) for p in points]
    return sum(haversine(a, b) for a, b in pairwise(points))


# --- bounding boxes ---


@dataclass(frozen=True)
class BBox:
    """A box of latitudes south..north and longitudes west..east (not across the antimeridian)."""

    south: float
    west: float
    north: float
    east: float

    def __post_init__(self) -> None:
        if self.south > self.north or self.west > self.east:
            raise ValueError(f"not a box: {self}")

    def contains(self, point: Point) -> bool:
        point = as_point(point)
        return self.south <= point.lat <= self.north and self.west <= point.lon <= self.east

    @property
    def center(self) -> Point:
        return Point((self.south + self.north) / 2, (self.west + self.east) / 2)

    def expand(self, km: float) -> "BBox":
        """The box grown by km on every side (clamped at the poles and at +-180)."""
        north = destination(Point(self.north, self.west), 0.0, km).lat if self.north < 90 else 90.0
        south = (
            destination(Point(self.south, self.west), 180.0, km).lat if self.south > -90 else -90.0
        )
        widest = max(abs(self.south), abs(self.north))
        dlon = math.degrees(km / (EARTH_RADIUS_KM * max(math.cos(math.radians(widest)), 1e-12)))
        return BBox(
            max(south, -90.0),
            max(self.west - dlon, -180.0),
            min(north, 90.0),
            min(self.east + dlon, 180.0),
        )


def bbox_of(points: Iterable[Point]) -> BBox:
    """The smallest box holding every point."""
    points = [as_point(p) for p in points]
    if not points:
        raise ValueError("no points")
    lats = [p.lat for p in points]
    lons = [p.lon for p in points]
    return BBox(min(lats), min(lons), max(lats), max(lons))


def overlaps(a: BBox, b: BBox) -> bool:
    return a.south <= b.north and b.south <= a.north and a.west <= b.east and b.west <= a.east


# --- parsing ---


class ParseError(ValueError):
    """Text that is not a coordinate."""


_DMS = re.compile(
    r"""^\s*(?P<deg>\d+(?:\.\d+)?)\s*(?:°|d|\s)\s*
    (?:(?P<min>\d+(?:\.\d+)?)\s*(?:'|\u2032|m|\s)\s*)?
    (?:(?P<sec>\d+(?:\.\d+)?)\s*(?:"|\u2033|s)?\s*)?
    (?P<hemi>[NSEW])\s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_DECIMAL_HEMI = re.compile(
    r"^\s*(?P<value>\d+(?:\.\d+)?)\s*°?\s*(?P<hemi>[NSEW])\s*$", re.IGNORECASE
)


def parse_dms(text: str) -> tuple[float, str]:
    """One coordinate with its hemisphere: "51°30'26.6\"N", "0 7 39.9 W", "51.5074N".
    Returns the signed degrees and "lat" or "lon"."""
    m = _DECIMAL_HEMI.match(text) or _DMS.match(text)
    if not m:
        raise ParseError(f"not a coordinate: {text!r}")
    groups = m.groupdict()
    if "value" in groups:
        degrees = float(groups["value"])
    else:
        minutes, seconds = float(groups["min"] or 0), float(groups["sec"] or 0)
        if minutes >= 60 or seconds >= 60:
            raise ParseError(f"minutes and seconds must be below 60: {text!r}")
        degrees = float(groups["deg"]) + minutes / 60 + seconds / 3600
    hemi = groups["hemi"].upper()
    sign = -1.0 if hemi in "SW" else 1.0
    return sign * degrees, "lat" if hemi in "NS" else "lon"


def parse_point(text: str) -> Point:
    """A point from "51.5074, -0.1278", "51.5074 -0.1278" or a pair with hemispheres in either
    order ("51°30'26.6\"N 0°7'39.9\"W", "0.1278W, 51.5074N")."""
    cleaned = text.strip()
    plain = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)\s*[,\s]\s*([-+]?\d+(?:\.\d+)?)", cleaned)
    try:
        if plain:
            return Point(float(plain.group(1)), float(plain.group(2)))
        parts = re.split(r"\s*,\s*|(?<=[NSEWnsew])\s+", cleaned)
        if len(parts) != 2:
            raise ParseError(f"not a point: {text!r}")
        (v1, axis1), (v2, axis2) = parse_dms(parts[0]), parse_dms(parts[1])
        if axis1 == axis2:
            raise ParseError(f"two {axis1}itudes: {text!r}")
        return Point(v1, v2) if axis1 == "lat" else Point(v2, v1)
    except ValueError as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(str(exc)) from None


# --- formatting ---


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
