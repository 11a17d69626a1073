"""Proration of subscription charges.

Money is integer cents throughout, never negative. Periods are half-open date ranges
[start, end): a monthly period from 2025-03-01 to 2025-04-01 has 31 days. Shares of a price
are rounded half up to the cent.
"""

from datetime import date


def days_between(start: date, end: date) -> int:
    """Days in [start, end); ValueError when end is before start."""
    if end < start:
        raise ValueError(f"period ends ({end}) before it starts ({start})")
    return (end - start).days


def prorate(amount: int, period_start: date, period_end: date, used_start: date, used_end: date) -> int:
    """The share of `amount` (the price of the whole period) for [used_start, used_end),
    clipped to the period, by days, rounded half up."""
    total = days_between(period_start, period_end)
    if total == 0:
        raise ValueError("empty billing period")
    start = max(used_start, period_start)
    end = min(used_end, period_end)
    if end <= start:
        return 0
    used = (end - start).days
    return (2 * amount * used + total) // (2 * total)


def split_evenly(amount: int, parts: int) -> list[int]:
    """`amount` in `parts` shares that differ by at most a cent, the larger ones first."""
    if parts <= 0:
        raise ValueError("parts must be positive")
    base, extra = divmod(amount, parts)
    return [base + 1 if i < extra else base for i in range(parts)]


def apply_discount(amount: int, percent: int) -> int:
    """`amount` less `percent` per cent of it (the discount rounded half up)."""
    if not 0 <= percent <= 100:
        raise ValueError(f"discount of {percent}%")
    return amount - (amount * percent + 50) // 100


def downgrade_credit(old_price: int, new_price: int, period_start: date, period_end: date, on: date) -> int:
    """What a customer who moves from `old_price` to `new_price` on `on` is owed for the rest
    of the period: the unused part of the old price less the new price's share; never negative
    (an upgrade owes nothing back)."""
    unused_old = prorate(old_price, period_start, period_end, period_start, on)
    unused_new = prorate(new_price, period_start, period_end, on, period_end)
    return max(0, unused_old - unused_new)
