import math

import pytest
from geokit.bbox import BBox, bbox_of
from geokit.distance import destination, haversine, initial_bearing, midpoint
from geokit.formatting import format_distance, format_dms, format_point
from geokit.parsing import ParseError, parse_dms, parse_point
from geokit.points import Point
from geokit.units import convert

LONDON = Point(51.5074, -0.1278)
PARIS = Point(48.8566, 2.3522)


def test_distance_and_bearing():
    assert haversine(LONDON, PARIS) == pytest.approx(343.56, abs=0.05)
    assert initial_bearing(LONDON, PARIS) == pytest.approx(148.1, abs=0.1)


def test_destination_round_trip():
    there = destination(LONDON, initial_bearing(LONDON, PARIS), haversine(LONDON, PARIS))
    assert haversine(there, PARIS) < 0.001


def test_midpoint_is_halfway():
    mid = midpoint(LONDON, PARIS)
    assert haversine(LONDON, mid) == pytest.approx(haversine(mid, PARIS), abs=1e-6)


def test_units():
    assert convert(1, "mi", "km") == pytest.approx(1.609344)
    assert format_distance(12.345) == "12.3 km"
    assert format_distance(0.85, "m") == "850 m"


def test_parse_and_format():
    assert parse_point("51.5074, -0.1278") == LONDON
    assert parse_point("0.1278W, 51.5074N") == LONDON
    assert parse_dms("51°30'26.6\"N") == (pytest.approx(51.50739, abs=1e-5), "lat")
    assert format_dms(-0.1278, "lon") == "0°07'40.1\"W"
    assert format_point(LONDON, precision=2) == "51.51, -0.13"
    with pytest.raises(ParseError):
        parse_point("somewhere")


def test_bbox():
    box = bbox_of([LONDON, PARIS])
    assert box == BBox(48.8566, -0.1278, 51.5074, 2.3522)
    assert box.contains(box.center) and not box.contains(Point(0, 0))
    assert math.isclose(box.expand(10).north, destination(Point(51.5074, 0), 0, 10).lat)
