import csv
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Item:
    sku: str
    name: str
    quantity: int
    price: float

    @property
    def value(self) -> float:
        return round(self.quantity * self.price, 2)


def load(path: Path) -> list[Item]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            Item(row["sku"], row["name"], int(row["quantity"]), float(row["price"]))
            for row in csv.DictReader(handle)
        ]


def sorted_items(items: list[Item], by: str) -> list[Item]:
    return sorted(items, key=lambda item: (getattr(item, by), item.sku))
