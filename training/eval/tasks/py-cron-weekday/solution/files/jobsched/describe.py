"""Cron expressions in words, for `jobsched list`."""

import calendar

from jobsched.cron import parse


def describe(expression: str) -> str:
    cron = parse(expression)
    parts = []
    if len(cron.hours) == 1 and len(cron.minutes) == 1:
        parts.append(f"at {min(cron.hours):02d}:{min(cron.minutes):02d}")
    else:
        parts.append(f"{len(cron.minutes) * len(cron.hours)} times a day")
    if cron.weekday_restricted:
        # cron counts weekdays from Sunday = 0, calendar.day_name from Monday = 0
        names = [calendar.day_name[(d - 1) % 7] for d in sorted(cron.weekdays)]
        parts.append("on " + ", ".join(names))
    if cron.day_restricted:
        parts.append("on day " + ", ".join(str(d) for d in sorted(cron.days)) + " of the month")
    if len(cron.months) < 12:
        parts.append("in " + ", ".join(calendar.month_name[m] for m in sorted(cron.months)))
    return " ".join(parts)
