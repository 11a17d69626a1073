from datetime import datetime, timedelta

import pytest

from jobsched.cron import CronError, matches, next_run, parse
from jobsched.describe import describe
from jobsched.jobs import listing

SUNDAY = datetime(2026, 3, 1, 12, 0)  # a Sunday


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("0 9 * * 1", SUNDAY, datetime(2026, 3, 2, 9, 0)),
        ("0 9 * * MON", SUNDAY, datetime(2026, 3, 2, 9, 0)),
        ("0 9 * * 0", SUNDAY, datetime(2026, 3, 8, 9, 0)),
        ("0 9 * * 7", SUNDAY, datetime(2026, 3, 8, 9, 0)),
        ("0 13 * * sun", SUNDAY, datetime(2026, 3, 1, 13, 0)),
        ("0 15 * * FRI", SUNDAY, datetime(2026, 3, 6, 15, 0)),
        ("0 0 * * 6", SUNDAY, datetime(2026, 3, 7, 0, 0)),
        ("30 8 * * 1-5", datetime(2026, 3, 6, 9, 0), datetime(2026, 3, 9, 8, 30)),
        ("30 8 * * 1-5", datetime(2026, 3, 6, 8, 0), datetime(2026, 3, 6, 8, 30)),
        ("0 10 * * 6,0", datetime(2026, 3, 2, 0, 0), datetime(2026, 3, 7, 10, 0)),
        ("0 10 * * 5-7", datetime(2026, 3, 2, 0, 0), datetime(2026, 3, 6, 10, 0)),
        ("*/15 * * * 3", SUNDAY, datetime(2026, 3, 4, 0, 0)),
        ("0 12 13 * 5", datetime(2026, 3, 1), datetime(2026, 3, 6, 12, 0)),
        ("0 12 13 * 5", datetime(2026, 3, 12, 13), datetime(2026, 3, 13, 12, 0)),
        ("0 12 2 * 5", datetime(2026, 3, 1, 13), datetime(2026, 3, 2, 12, 0)),
        ("0 9 * * 1", datetime(2026, 3, 2, 9, 0), datetime(2026, 3, 9, 9, 0)),
        ("0 0 1 JAN,APR,JUL,OCT *", SUNDAY, datetime(2026, 4, 1, 0, 0)),
        ("15 2 * * *", SUNDAY, datetime(2026, 3, 2, 2, 15)),
        ("0 6 25 * *", SUNDAY, datetime(2026, 3, 25, 6, 0)),
    ],
)
def test_next_run(expression, after, expected):
    assert next_run(expression, after) == expected


def test_every_weekday_number():
    names = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
    for number, name in enumerate(names):
        for spelled in (str(number), name):
            runs = [next_run(f"0 9 * * {spelled}", SUNDAY + timedelta(days=k)) for k in range(7)]
            assert all(r.strftime("%a").upper() == name for r in runs), (spelled, runs)


def test_matches():
    monday = datetime(2026, 3, 2, 9, 0)
    assert matches(parse("0 9 * * 1"), monday)
    assert not matches(parse("0 9 * * 2"), monday)
    assert matches(parse("0 9 * * 1-5"), monday) and not matches(parse("0 9 * * 1-5"), SUNDAY.replace(hour=9, minute=0))
    assert matches(parse("0 9 * * 0"), datetime(2026, 3, 1, 9, 0)) and matches(parse("0 9 * * 7"), datetime(2026, 3, 1, 9, 0))


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("0 9 * * 1", "on Monday"),
        ("0 9 * * 0", "on Sunday"),
        ("0 9 * * 7", "on Sunday"),
        ("0 15 * * FRI", "on Friday"),
        ("30 8 * * 1-5", "on Monday, Tuesday, Wednesday, Thursday, Friday"),
    ],
)
def test_describe(expression, words):
    text = describe(expression)
    assert words in text
    other = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"} - set(words.removeprefix("on ").split(", "))
    assert not any(day in text for day in other), text


def test_describe_weekend_and_plain():
    text = describe("0 10 * * 6,0")
    assert "Saturday" in text and "Sunday" in text and "Friday" not in text and "Monday" not in text
    assert describe("15 2 * * *") == "at 02:15"


def test_listing():
    lines = {line.split()[0]: line for line in listing(SUNDAY)}
    assert "on Monday" in lines["weekly-report"] and "next Mon 2026-03-02 09:00" in lines["weekly-report"]
    assert "on Friday" in lines["friday-deploy-freeze"] and "next Fri 2026-03-06 15:00" in lines["friday-deploy-freeze"]


@pytest.mark.parametrize("expression", ["0 9 * * 8", "0 9 * *", "60 * * * *", "0 9 * * XYZ"])
def test_still_rejects_bad_expressions(expression):
    with pytest.raises(CronError):
        parse(expression)
