"""Positions on the globe."""

from collections.abc import Mapping
from dataclasses import dataclass


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
