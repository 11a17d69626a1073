"""Refunds."""

from shop.orders import Order, OrderError

REFUNDABLE = {"paid", "shipped", "delivered"}


def can_refund(order: Order) -> bool:
    return order.status in REFUNDABLE


def refund(order: Order) -> int:
    """Marks the order refunded; the amount to pay back, in cents."""
    if not can_refund(order):
        raise OrderError(f"order {order.id} is {order.status}, cannot refund")
    order._set("refunded")
    return order.total_cents
