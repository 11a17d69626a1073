"""Gross sales of one store on one day: `python3 scripts/daily_totals.py S01 2025-07-04`."""

import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "sales"


def gross(store: str, day: str) -> float:
    total = 0.0
    lines = (DATA / store / f"{day}.csv").read_text().splitlines()
    for line in lines[1:]:
        if not line.strip():
            continue
        date, sku, kind, quantity, price = line.split(",")
        if kind == "sale":
            total += int(quantity) * float(price)
    return round(total, 2)


if __name__ == "__main__":
    print(gross(sys.argv[1], sys.argv[2]))
