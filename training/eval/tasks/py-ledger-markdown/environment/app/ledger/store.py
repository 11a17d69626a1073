"""Reading the journal (a CSV file with the columns of `ledger.model.COLUMNS`)."""

import csv
from datetime import date
from decimal import Decimal
from pathlib import Path

from ledger.model import Entry


def load(path: Path) -> list[Entry]:
    with Path(path).open(newline="", encoding="utf-8") as f:
        return [
            Entry(
                date.fromisoformat(row["date"]),
                row["account"],
                row["description"],
                Decimal(row["amount"]),
                row.get("currency") or "EUR",
            )
            for row in csv.DictReader(f)
        ]


def select(entries: list[Entry], account: str | None = None) -> list[Entry]:
    """Entries of `account` and its sub-accounts (assets:bank covers assets:bank:savings)."""
    if account is None:
        return list(entries)
    return [e for e in entries if e.account == account or e.account.startswith(account + ":")]
