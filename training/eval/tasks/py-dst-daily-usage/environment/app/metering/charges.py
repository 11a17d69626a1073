"""Daily charges: a reserved-capacity fee per hour of the day, plus metered usage."""

from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from metering.days import hours_in_day


def reserved_fee(day: date, tz: str, cents_per_hour: int) -> int:
    """The capacity fee for the customer's local day: every real hour of it is billed."""
    hours = Decimal(str(hours_in_day(day, tz)))
    return int((hours * cents_per_hour).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def daily_charge(day: date, tz: str, cents_per_hour: int, usage_units: float, cents_per_unit: int) -> int:
    usage = (Decimal(str(usage_units)) * cents_per_unit).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return reserved_fee(day, tz, cents_per_hour) + int(usage)
