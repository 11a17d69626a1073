"""Small geographic helpers for the delivery planner."""

from geokit.bbox import BBox, bbox_of
from geokit.distance import destination, haversine, initial_bearing, midpoint, path_length
from geokit.formatting import format_distance, format_point
from geokit.parsing import ParseError, parse_point
from geokit.points import Point
from geokit.units import convert

__all__ = [
    "BBox",
    "ParseError",
    "Point",
    "bbox_of",
    "convert",
    "destination",
    "format_distance",
    "format_point",
    "haversine",
    "initial_bearing",
    "midpoint",
    "parse_point",
    "path_length",
]
