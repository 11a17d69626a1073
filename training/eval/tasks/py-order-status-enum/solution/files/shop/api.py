"""The JSON API's handlers: plain dicts in, plain dicts out (statuses as strings)."""

from shop import refunds
from shop.orders import Order, OrderError
from shop.status import OrderStatus

ACTIONS = {"pay": Order.pay, "ship": Order.ship, "deliver": Order.deliver, "cancel": Order.cancel}


def order_json(order: Order) -> dict:
    return {"id": order.id, "customer": order.customer, "total_cents": order.total_cents, "status": order.status.value}


def list_orders(orders: list[Order], status: str | None = None) -> dict:
    try:
        wanted = None if status is None else OrderStatus(status)
    except ValueError:
        return {"error": f"unknown status {status!r}"}
    chosen = [o for o in orders if wanted is None or o.status is wanted]
    return {"orders": [order_json(o) for o in chosen]}


def act(order: Order, action: str) -> dict:
    try:
        if action == "refund":
            refunds.refund(order)
        elif action in ACTIONS:
            ACTIONS[action](order)
        else:
            return {"error": f"unknown action {action!r}"}
    except OrderError as exc:
        return {"error": str(exc)}
    return order_json(order)
