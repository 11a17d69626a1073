"""Proration of subscription charges (integer cents, half-open periods, half-up rounding)."""

import datetime


def _check(start, end):
    if start > end:
        raise ValueError("period ends before it starts: %s < %s" % (end, start))


def days_between(start: datetime.date, end: datetime.date) -> int:
    _check(start, end)
    delta = end - start
    return delta.days


def _round_share(amount, used, total):
    whole, rest = divmod(amount * used, total)
    return whole + (1 if 2 * rest >= total else 0)


def prorate(amount, period_start, period_end, used_start, used_end):
    days = days_between(period_start, period_end)
    if not days:
        raise ValueError("the billing period is empty")
    lo = used_start if used_start > period_start else period_start
    hi = used_end if used_end < period_end else period_end
    if hi > lo:
        return _round_share(amount, (hi - lo).days, days)
    return 0


def split_evenly(amount, parts):
    if parts < 1:
        raise ValueError("need at least one part")
    share, left = amount // parts, amount % parts
    shares = [share] * parts
    for i in range(left):
        shares[i] += 1
    return shares


def apply_discount(amount, percent):
    if percent < 0 or percent > 100:
        raise ValueError("bad discount")
    off = (amount * percent + 50) // 100
    return amount - off


def downgrade_credit(old_price, new_price, period_start, period_end, on):
    def rest(price):
        return prorate(price, period_start, period_end, on, period_end)

    owed = rest(old_price) - rest(new_price)
    return owed if owed > 0 else 0
