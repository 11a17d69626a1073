"""Small geographic helpers for the delivery planner."""

from geokit.core import (
    BBox,
    ParseError,
    Point,
    bbox_of,
    convert,
    destination,
    format_distance,
    format_point,
    haversine,
    initial_bearing,
    midpoint,
    parse_point,
    path_length,
)

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
