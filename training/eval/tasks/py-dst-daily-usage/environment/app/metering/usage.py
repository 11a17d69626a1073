"""Usage samples (UTC) bucketed into the customer's local hours and days."""

from collections import defaultdict
from datetime import date, datetime, timezone

from metering.days import hour_starts, local_day


def hourly(samples: list[tuple[datetime, float]], day: date, tz: str) -> list[float]:
    """Usage per hour of the local day `day`, one entry per real hour (23 to 25 of them)."""
    starts = hour_starts(day, tz)
    buckets = [0.0] * len(starts)
    for moment, amount in samples:
        moment = moment.astimezone(timezone.utc)
        if local_day(moment, tz) != day:
            continue
        index = max(i for i, s in enumerate(starts) if s <= moment)
        buckets[index] += amount
    return buckets


def daily(samples: list[tuple[datetime, float]], tz: str) -> dict[date, float]:
    totals: dict[date, float] = defaultdict(float)
    for moment, amount in samples:
        totals[local_day(moment, tz)] += amount
    return dict(totals)
