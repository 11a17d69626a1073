"""Refunds."""

from shop.orders import Order, OrderError
from shop.status import OrderStatus

REFUNDABLE = {OrderStatus.PAID, OrderStatus.SHIPPED, OrderStatus.DELIVERED}


def can_refund(order: Order) -> bool:
    return order.status in REFUNDABLE


def refund(order: Order) -> int:
    """Marks the order refunded; the amount to pay back, in cents."""
    if not can_refund(order):
        raise OrderError(f"order {order.id} is {order.status}, cannot refund")
    order._set(OrderStatus.REFUNDED)
    return order.total_cents
