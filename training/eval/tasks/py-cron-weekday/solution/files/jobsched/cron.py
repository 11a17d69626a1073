"""Five-field cron expressions: minute hour day-of-month month day-of-week.

Fields take `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`, and lists `a,b,c`; months
and weekdays also take names (JAN..DEC, SUN..SAT). Weekdays count from Sunday = 0 (7 is
Sunday too), as in crontab(5). As in crontab, when both day-of-month and day-of-week are
restricted (neither is `*`), a day matches if either does.
"""

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

MONTHS = {name.upper(): n for n, name in enumerate(calendar.month_abbr) if name}
WEEKDAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day", 1, 31, {}), ("month", 1, 12, MONTHS), ("weekday", 0, 7, WEEKDAYS))


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_restricted: bool
    weekday_restricted: bool


def _value(text: str, names: dict[str, int]) -> int:
    text = text.upper()
    if text in names:
        return names[text]
    if not text.isdigit():
        raise CronError(f"not a number: {text!r}")
    return int(text)


def _field(text: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise CronError(f"bad step in {part!r}")
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, b = body.split("-", 1)
            first, last = _value(a, names), _value(b, names)
        else:
            first = _value(body, names)
            last = high if step_text else first
        if not (low <= first <= last <= high):
            raise CronError(f"{part!r} is out of range {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse(expression: str) -> Cron:
    parts = expression.split()
    if len(parts) != 5:
        raise CronError(f"expected 5 fields, got {len(parts)}: {expression!r}")
    sets = [_field(p, low, high, names) for p, (_, low, high, names) in zip(parts, FIELDS)]
    weekdays = frozenset(0 if d == 7 else d for d in sets[4])
    return Cron(sets[0], sets[1], sets[2], sets[3], weekdays, parts[2] != "*", parts[4] != "*")


def cron_weekday(moment: datetime) -> int:
    """The day of the week counted as cron counts it (Sunday = 0); datetime.weekday()
    counts from Monday = 0."""
    return (moment.weekday() + 1) % 7


def _day_matches(cron: Cron, moment: datetime) -> bool:
    in_month = moment.day in cron.days
    in_week = cron_weekday(moment) in cron.weekdays
    if cron.day_restricted and cron.weekday_restricted:
        return in_month or in_week
    return in_month and in_week


def matches(cron: Cron, moment: datetime) -> bool:
    return (
        moment.minute in cron.minutes
        and moment.hour in cron.hours
        and moment.month in cron.months
        and _day_matches(cron, moment)
    )


def next_run(expression: str, after: datetime) -> datetime:
    """The first minute strictly after `after` that the expression matches."""
    cron = parse(expression)
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    limit = moment + timedelta(days=366 * 5)
    while moment < limit:
        if moment.month not in cron.months:
            moment = (moment.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            continue
        if not _day_matches(cron, moment):
            moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
            continue
        if moment.hour not in cron.hours:
            moment = moment.replace(minute=0) + timedelta(hours=1)
            continue
        if moment.minute in cron.minutes:
            return moment
        moment += timedelta(minutes=1)
    raise CronError(f"{expression!r} never matches")
