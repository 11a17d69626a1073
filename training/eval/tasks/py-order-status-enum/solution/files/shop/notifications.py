"""E-mails sent when an order changes state."""

from shop.orders import Order
from shop.status import OrderStatus

SUBJECTS = {
    OrderStatus.PAID: "Thanks for your order {id}",
    OrderStatus.SHIPPED: "Your order {id} is on its way",
    OrderStatus.DELIVERED: "Your order {id} has arrived",
    OrderStatus.CANCELLED: "Your order {id} was cancelled",
    OrderStatus.REFUNDED: "We refunded your order {id}",
}


def subject(order: Order) -> str | None:
    """The e-mail subject for the order's current state; None when we send nothing."""
    template = SUBJECTS.get(order.status)
    return template.format(id=order.id) if template else None


def needs_tracking_link(order: Order) -> bool:
    return order.status is OrderStatus.SHIPPED
