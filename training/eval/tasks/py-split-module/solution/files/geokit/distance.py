"""Great-circle distances, bearings and destinations."""

import math
from collections.abc import Iterable
from itertools import pairwise

from geokit.points import Point, as_point, normalize_lon

EARTH_RADIUS_KM = 6371.0088
"""The mean radius (IUGG)."""


def _radians(point: Point) -> tuple[float, float]:
    return math.radians(point.lat), math.radians(point.lon)


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
