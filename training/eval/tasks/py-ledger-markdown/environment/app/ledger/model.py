"""Journal entries."""

from dataclasses import dataclass
from datetime import date
from decimal import Decimal


@dataclass(frozen=True)
class Entry:
    date: date
    account: str
    description: str
    amount: Decimal
    currency: str = "EUR"


COLUMNS = ("date", "account", "description", "amount", "currency")
