"""Customers are billed per day of their own calendar (their IANA time zone)."""

from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo


def day_bounds(day: date, tz: str) -> tuple[datetime, datetime]:
    """The local day `day` in `tz` as [start, end), both aware."""
    zone = ZoneInfo(tz)
    start = datetime.combine(day, time(0), tzinfo=zone)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone)
    return start, end


def hours_in_day(day: date, tz: str) -> float:
    """How long the local day really is: 23 or 25 hours on DST changes."""
    start, end = day_bounds(day, tz)
    # Subtracting two datetimes that share a tzinfo ignores their UTC offsets (wall-clock
    # arithmetic); in UTC the difference is the real elapsed time.
    return (end.astimezone(timezone.utc) - start.astimezone(timezone.utc)).total_seconds() / 3600


def hour_starts(day: date, tz: str) -> list[datetime]:
    """The start of every hour of the local day, in UTC, in order."""
    start, end = day_bounds(day, tz)
    # Step in UTC: adding hours to a local time is wall-clock arithmetic, which lands on the
    # missing hour in spring and skips the repeated one in autumn.
    moment, end = start.astimezone(timezone.utc), end.astimezone(timezone.utc)
    starts = []
    while moment < end:
        starts.append(moment)
        moment += timedelta(hours=1)
    return starts


def local_day(moment: datetime, tz: str) -> date:
    """The customer's calendar day of an aware `moment`."""
    return moment.astimezone(ZoneInfo(tz)).date()
