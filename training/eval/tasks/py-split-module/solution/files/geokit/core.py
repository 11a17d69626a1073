"""Deprecated: geokit.core was split into geokit.points, geokit.units, geokit.distance,
geokit.bbox, geokit.parsing and geokit.formatting; import from those. This module only
re-exports their names, for one more release."""

import warnings

from geokit.bbox import BBox, bbox_of, overlaps
from geokit.distance import (
    EARTH_RADIUS_KM,
    destination,
    haversine,
    initial_bearing,
    midpoint,
    path_length,
)
from geokit.formatting import format_distance, format_dms, format_point
from geokit.parsing import ParseError, parse_dms, parse_point
from geokit.points import Point, as_point, normalize_lon
from geokit.units import KM_PER_MILE, KM_PER_NAUTICAL_MILE, UNITS, convert, km_to_miles, miles_to_km

warnings.warn(
    "geokit.core is deprecated; import from geokit.points, geokit.units, geokit.distance, "
    "geokit.bbox, geokit.parsing or geokit.formatting instead",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "EARTH_RADIUS_KM",
    "KM_PER_MILE",
    "KM_PER_NAUTICAL_MILE",
    "UNITS",
    "BBox",
    "ParseError",
    "Point",
    "as_point",
    "bbox_of",
    "convert",
    "destination",
    "format_distance",
    "format_dms",
    "format_point",
    "haversine",
    "initial_bearing",
    "km_to_miles",
    "midpoint",
    "miles_to_km",
    "normalize_lon",
    "overlaps",
    "parse_dms",
    "parse_point",
    "path_length",
]
