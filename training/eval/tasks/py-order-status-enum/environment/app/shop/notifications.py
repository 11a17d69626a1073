"""E-mails sent when an order changes state."""

from shop.orders import Order

SUBJECTS = {
    "paid": "Thanks for your order {id}",
    "shipped": "Your order {id} is on its way",
    "delivered": "Your order {id} has arrived",
    "cancelled": "Your order {id} was cancelled",
    "refunded": "We refunded your order {id}",
}


def subject(order: Order) -> str | None:
    """The e-mail subject for the order's current state; None when we send nothing."""
    template = SUBJECTS.get(order.status)
    return template.format(id=order.id) if template else None


def needs_tracking_link(order: Order) -> bool:
    return order.status == "shipped"
