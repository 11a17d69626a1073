"""Orders on disk: one JSON document holding a list of orders."""

import json
from pathlib import Path

from shop.orders import Order

VALID = ("pending", "paid", "shipped", "delivered", "cancelled", "refunded")


def dump(orders: list[Order]) -> str:
    return json.dumps(
        [
            {"id": o.id, "customer": o.customer, "total_cents": o.total_cents, "status": o.status,
             "events": [list(e) for e in o.events]}
            for o in orders
        ],
        indent=2,
    )


def parse(text: str) -> list[Order]:
    orders = []
    for raw in json.loads(text):
        if raw["status"] not in VALID:
            raise ValueError(f"order {raw['id']}: unknown status {raw['status']!r}")
        orders.append(Order(raw["id"], raw["customer"], raw["total_cents"], raw["status"],
                            [tuple(e) for e in raw.get("events", [])]))
    return orders


def save(orders: list[Order], path: Path) -> None:
    Path(path).write_text(dump(orders), encoding="utf-8")


def load(path: Path) -> list[Order]:
    return parse(Path(path).read_text(encoding="utf-8"))
