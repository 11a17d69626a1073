from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from metering.charges import daily_charge, reserved_fee
from metering.days import day_bounds, hour_starts, hours_in_day, local_day
from metering.usage import daily, hourly

UTC = timezone.utc


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tz", "day", "hours"),
    [
        ("Europe/Berlin", date(2026, 3, 29), 23),
        ("Europe/Berlin", date(2026, 10, 25), 25),
        ("Europe/Berlin", date(2026, 3, 28), 24),
        ("Europe/Berlin", date(2026, 3, 30), 24),
        ("America/New_York", date(2026, 3, 8), 23),
        ("America/New_York", date(2026, 11, 1), 25),
        ("Australia/Lord_Howe", date(2026, 4, 5), 24.5),
        ("Australia/Lord_Howe", date(2026, 10, 4), 23.5),
        ("Asia/Kolkata", date(2026, 3, 29), 24),
        ("UTC", date(2026, 3, 29), 24),
    ],
)
def test_hours_in_day(tz, day, hours):
    assert hours_in_day(day, tz) == hours


def test_day_bounds_are_local_midnights():
    start, end = day_bounds(date(2026, 3, 29), "Europe/Berlin")
    assert start.astimezone(UTC) == utc(2026, 3, 28, 23) and end.astimezone(UTC) == utc(2026, 3, 29, 22)
    zone = ZoneInfo("Europe/Berlin")
    assert start.astimezone(zone).hour == 0 and end.astimezone(zone).hour == 0


@pytest.mark.parametrize(
    ("tz", "day", "first", "count"),
    [
        ("Europe/Berlin", date(2026, 3, 29), utc(2026, 3, 28, 23), 23),
        ("Europe/Berlin", date(2026, 10, 25), utc(2026, 10, 24, 22), 25),
        ("Europe/Berlin", date(2026, 7, 1), utc(2026, 6, 30, 22), 24),
        ("America/New_York", date(2026, 11, 1), utc(2026, 11, 1, 4), 25),
    ],
)
def test_hour_starts(tz, day, first, count):
    starts = hour_starts(day, tz)
    assert len(starts) == count
    assert [s.astimezone(UTC) for s in starts] == [first + timedelta(hours=h) for h in range(count)]


def test_hourly_spring_forward():
    day, tz = date(2026, 3, 29), "Europe/Berlin"
    samples = [(utc(2026, 3, 28, 23, 30), 1.0), (utc(2026, 3, 29, 0, 30), 2.0), (utc(2026, 3, 29, 1, 30), 4.0),
               (utc(2026, 3, 29, 21, 59), 8.0), (utc(2026, 3, 29, 22, 0), 100.0), (utc(2026, 3, 28, 22, 59), 100.0)]
    buckets = hourly(samples, day, tz)
    assert len(buckets) == 23
    assert buckets[:3] == [1.0, 2.0, 4.0] and buckets[-1] == 8.0 and sum(buckets) == 15.0


def test_hourly_fall_back_keeps_both_two_oclocks():
    day, tz = date(2026, 10, 25), "Europe/Berlin"
    samples = [(utc(2026, 10, 25, 0, 30), 1.0), (utc(2026, 10, 25, 1, 30), 2.0), (utc(2026, 10, 25, 2, 30), 4.0)]
    buckets = hourly(samples, day, tz)
    assert len(buckets) == 25
    assert buckets[2:5] == [1.0, 2.0, 4.0] and sum(buckets) == 7.0


def test_reserved_fee_and_charge():
    assert reserved_fee(date(2026, 3, 29), "Europe/Berlin", 150) == 23 * 150
    assert reserved_fee(date(2026, 10, 25), "Europe/Berlin", 150) == 25 * 150
    assert reserved_fee(date(2026, 4, 5), "Australia/Lord_Howe", 101) == 2475  # 24.5 x 101 = 2474.5
    assert reserved_fee(date(2026, 5, 5), "Europe/Berlin", 150) == 3600
    assert daily_charge(date(2026, 3, 29), "Europe/Berlin", 100, 2.5, 3) == 2300 + 8


def test_days_unchanged():
    assert local_day(utc(2026, 3, 28, 23, 30), "Europe/Berlin") == date(2026, 3, 29)
    assert daily([(utc(2026, 3, 28, 22, 30), 1.0), (utc(2026, 3, 28, 23, 30), 2.0)], "Europe/Berlin") == {
        date(2026, 3, 28): 1.0, date(2026, 3, 29): 2.0}
