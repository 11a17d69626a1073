"""Numbers for the weekly ops review."""

from collections import Counter

from shop.orders import Order


def count_by_status(orders: list[Order]) -> dict[str, int]:
    counts = Counter(o.status for o in orders)
    return {s: counts[s] for s in ("pending", "paid", "shipped", "delivered", "cancelled", "refunded")}


def revenue_cents(orders: list[Order]) -> int:
    """Money we keep: paid, shipped and delivered orders."""
    return sum(o.total_cents for o in orders if o.status in ("paid", "shipped", "delivered"))


def backlog(orders: list[Order]) -> list[Order]:
    """Paid but not yet shipped, oldest first."""
    return sorted((o for o in orders if o.status == "paid"), key=lambda o: o.events[-1][0] if o.events else "")
