import csv
from collections import defaultdict
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path

from salesreport.model import Report, Row, Sale

GROUPS = ("region", "product")


class BadExport(ValueError):
    """A line of the export that cannot be read."""


def load_sales(path: Path) -> list[Sale]:
    """The sales of a CSV export with the columns date, region, product, units, unit_price."""
    sales = []
    with open(path, newline="", encoding="utf-8") as f:
        for number, record in enumerate(csv.DictReader(f), start=2):
            try:
                sales.append(
                    Sale(
                        day=date.fromisoformat(record["date"]),
                        region=record["region"].strip(),
                        product=record["product"].strip(),
                        units=int(record["units"]),
                        unit_price=Decimal(record["unit_price"]),
                    )
                )
            except (KeyError, ValueError, InvalidOperation) as exc:
                raise BadExport(f"{path}, line {number}: {exc}") from None
    return sales


def build_report(sales: list[Sale], by: str = "region") -> Report:
    """Orders, units and revenue per region (or product), largest revenue first."""
    if by not in GROUPS:
        raise ValueError(f"cannot group by {by!r}; use one of {', '.join(GROUPS)}")
    groups: dict[str, list[Sale]] = defaultdict(list)
    for sale in sales:
        groups[getattr(sale, by)].append(sale)
    rows = [_row(key, items) for key, items in groups.items()]
    rows.sort(key=lambda row: (-row.revenue, row.key))
    days = [sale.day for sale in sales]
    return Report(
        title=f"Sales by {by}",
        by=by,
        rows=rows,
        total=_row("TOTAL", sales),
        first_day=min(days, default=None),
        last_day=max(days, default=None),
    )


def _row(key: str, sales: list[Sale]) -> Row:
    revenue = sum((sale.revenue for sale in sales), Decimal(0)).quantize(Decimal("0.01"))
    return Row(key, len(sales), sum(sale.units for sale in sales), revenue)
