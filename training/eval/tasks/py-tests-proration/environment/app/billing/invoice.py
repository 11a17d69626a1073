"""Invoice lines for a plan change in the middle of a period."""

from datetime import date

from billing.plans import PLANS
from billing.proration import downgrade_credit, prorate


def change_lines(old: str, new: str, period_start: date, period_end: date, on: date) -> list[tuple[str, int]]:
    """(description, cents) lines for switching plans on `on`; a credit is negative."""
    old_p, new_p = PLANS[old].monthly_cents, PLANS[new].monthly_cents
    if new_p >= old_p:
        extra = prorate(new_p - old_p, period_start, period_end, on, period_end)
        return [(f"Upgrade to {PLANS[new].name} from {on}", extra)]
    credit = downgrade_credit(old_p, new_p, period_start, period_end, on)
    return [(f"Credit for {PLANS[old].name} from {on}", -credit)]
