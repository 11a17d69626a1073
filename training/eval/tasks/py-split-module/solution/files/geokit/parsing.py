"""Reading coordinates: decimal degrees, or degrees, minutes and seconds with hemispheres."""

import re

from geokit.points import Point


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
