"""Bounding boxes."""

import math
from collections.abc import Iterable
from dataclasses import dataclass

from geokit.distance import EARTH_RADIUS_KM, destination
from geokit.points import Point, as_point


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
