from dataclasses import dataclass
from datetime import date
from decimal import Decimal


@dataclass(frozen=True)
class Sale:
    """One line of an export."""

    day: date
    region: str
    product: str
    units: int
    unit_price: Decimal

    @property
    def revenue(self) -> Decimal:
        return self.units * self.unit_price


@dataclass(frozen=True)
class Row:
    """One group of the report (a region or a product), or the total."""

    key: str
    orders: int
    units: int
    revenue: Decimal


@dataclass(frozen=True)
class Report:
    title: str
    by: str
    """What the rows are grouped by: "region" or "product"."""

    rows: list[Row]
    total: Row
    first_day: date | None
    last_day: date | None

    @property
    def columns(self) -> list[str]:
        return [self.by, "orders", "units", "revenue"]
