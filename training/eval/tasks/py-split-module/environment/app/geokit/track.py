"""Delivery tracks: a CSV of lat,lon lines (a header line is allowed), one fix per line."""

import csv
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from geokit.core import BBox, Point, bbox_of, haversine, path_length


@dataclass(frozen=True)
class Track:
    points: list[Point]

    @property
    def length_km(self) -> float:
        return path_length(self.points)

    @property
    def bbox(self) -> BBox:
        return bbox_of(self.points)

    def longest_leg(self) -> tuple[int, float]:
        """The index of the leg (from point i to i+1) that is longest, and its length in km."""
        legs = [haversine(a, b) for a, b in pairwise(self.points)]
        if not legs:
            raise ValueError("a track of fewer than two points has no legs")
        i = max(range(len(legs)), key=legs.__getitem__)
        return i, legs[i]


def load_track(path: Path) -> Track:
    points = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            if not row or row[0].strip().lower() in ("lat", "latitude"):
                continue
            points.append(Point(float(row[0]), float(row[1])))
    return Track(points)
