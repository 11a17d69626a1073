from datetime import date

from metering.days import hours_in_day


def test_ordinary_day():
    assert hours_in_day(date(2026, 6, 1), "Europe/Berlin") == 24
