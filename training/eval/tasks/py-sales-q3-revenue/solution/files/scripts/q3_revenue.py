"""Net revenue (sales minus refunds) of one region's stores over a date range."""

import csv
import datetime as dt
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
COLUMNS = {"date", "sku", "type", "quantity", "unit_price"}


def region_stores(region: str) -> list[str]:
    with (DATA / "stores.csv").open(newline="", encoding="utf-8-sig") as f:
        return [r["store_id"].strip() for r in csv.DictReader(f) if r["region"].strip().upper() == region]


def net_revenue(region: str, first: dt.date, last: dt.date) -> tuple[Decimal, int]:
    total, skipped = Decimal(0), 0
    for store in region_stores(region):
        for path in sorted((DATA / "sales" / store).glob("*.csv")):
            if not first <= dt.date.fromisoformat(path.stem) <= last:
                continue
            with path.open(newline="", encoding="utf-8-sig") as f:
                reader = csv.reader(f)
                header = [h.strip().lower() for h in next(reader)]
                assert set(header) == COLUMNS, (path, header)
                for fields in reader:
                    if not fields or not any(x.strip() for x in fields):
                        continue
                    if [x.strip().lower() for x in fields] == header:
                        continue  # a header sent again mid-file
                    if len(fields) != len(header):
                        skipped += 1
                        continue
                    row = dict(zip(header, (x.strip() for x in fields)))
                    try:
                        qty, price = int(row["quantity"]), Decimal(row["unit_price"])
                        day = dt.date.fromisoformat(row["date"])
                    except (ValueError, InvalidOperation):
                        skipped += 1
                        continue
                    kind = row["type"].lower()
                    if kind not in ("sale", "refund") or not first <= day <= last:
                        skipped += 1
                        continue
                    total += qty * price if kind == "sale" else -qty * price
    return total, skipped


if __name__ == "__main__":
    total, skipped = net_revenue("EU", dt.date(2025, 7, 1), dt.date(2025, 9, 30))
    print(f"skipped {skipped} malformed rows", file=sys.stderr)
    print(f"{total:.2f}")
