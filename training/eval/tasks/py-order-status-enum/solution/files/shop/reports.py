"""Numbers for the weekly ops review."""

from collections import Counter

from shop.orders import Order
from shop.status import OrderStatus


def count_by_status(orders: list[Order]) -> dict[OrderStatus, int]:
    counts = Counter(o.status for o in orders)
    return {s: counts[s] for s in OrderStatus}


def revenue_cents(orders: list[Order]) -> int:
    """Money we keep: paid, shipped and delivered orders."""
    return sum(o.total_cents for o in orders if o.status in (OrderStatus.PAID, OrderStatus.SHIPPED, OrderStatus.DELIVERED))


def backlog(orders: list[Order]) -> list[Order]:
    """Paid but not yet shipped, oldest first."""
    return sorted((o for o in orders if o.status is OrderStatus.PAID), key=lambda o: o.events[-1][0] if o.events else "")
