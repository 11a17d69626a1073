"""Orders on disk: one JSON document holding a list of orders."""

import json
from pathlib import Path

from shop.orders import Order
from shop.status import OrderStatus



def dump(orders: list[Order]) -> str:
    return json.dumps(
        [
            {"id": o.id, "customer": o.customer, "total_cents": o.total_cents, "status": o.status.value,
             "events": [[stamp, status.value] for stamp, status in o.events]}
            for o in orders
        ],
        indent=2,
    )


def parse(text: str) -> list[Order]:
    orders = []
    for raw in json.loads(text):
        try:
            status = OrderStatus(raw["status"])
            events = [(stamp, OrderStatus(s)) for stamp, s in raw.get("events", [])]
        except ValueError:
            raise ValueError(f"order {raw['id']}: unknown status {raw['status']!r}") from None
        orders.append(Order(raw["id"], raw["customer"], raw["total_cents"], status, events))
    return orders


def save(orders: list[Order], path: Path) -> None:
    Path(path).write_text(dump(orders), encoding="utf-8")


def load(path: Path) -> list[Order]:
    return parse(Path(path).read_text(encoding="utf-8"))
