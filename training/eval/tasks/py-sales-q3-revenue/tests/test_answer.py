import csv
import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest

APP = Path("/app")
FIRST, LAST = dt.date(2025, 7, 1), dt.date(2025, 9, 30)


def expected():
    """The EU stores' Q3 sales minus refunds, recomputed from the exports, malformed rows out."""
    with (APP / "data" / "stores.csv").open(newline="", encoding="utf-8-sig") as f:
        eu = [r["store_id"].strip() for r in csv.DictReader(f) if r["region"].strip().upper() == "EU"]
    assert len(eu) == 6
    total = Decimal(0)
    for store in eu:
        for path in (APP / "data" / "sales" / store).glob("*.csv"):
            rows = list(csv.reader(path.read_text(encoding="utf-8-sig").splitlines()))
            header = [h.strip().lower() for h in rows[0]]
            for fields in rows[1:]:
                fields = [x.strip() for x in fields]
                if not any(fields) or [x.lower() for x in fields] == header or len(fields) != len(header):
                    continue
                row = dict(zip(header, fields))
                if not re.fullmatch(r"\d+", row["quantity"]) or not re.fullmatch(r"\d+\.\d\d", row["unit_price"]):
                    continue
                if not FIRST <= dt.date.fromisoformat(row["date"]) <= LAST:
                    continue
                amount = int(row["quantity"]) * Decimal(row["unit_price"])
                kind = row["type"].lower()
                assert kind in ("sale", "refund")
                total += amount if kind == "sale" else -amount
    return total


def answer():
    path = APP / "answer.txt"
    assert path.is_file(), "no answer.txt"
    text = path.read_text().strip().replace(",", "").replace("€", "").replace("EUR", "").strip()
    try:
        return Decimal(text)
    except InvalidOperation:
        pytest.fail(f"answer.txt does not hold just a number: {path.read_text()[:200]!r}")


def test_answer_matches_the_exports():
    want = expected()
    assert want > 10000
    assert abs(answer() - want) <= Decimal("0.01"), f"answer.txt is off (expected about {want:.0f})"
