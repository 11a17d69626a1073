"""Subscription billing: plans, proration and invoices."""

from billing.plans import PLANS, Plan, monthly_price
from billing.proration import apply_discount, days_between, downgrade_credit, prorate, split_evenly

__all__ = [
    "PLANS", "Plan", "apply_discount", "days_between", "downgrade_credit", "monthly_price",
    "prorate", "split_evenly",
]
