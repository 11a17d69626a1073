"""Entry fields as the text exports show them."""

from ledger.config import ExportSettings
from ledger.model import Entry


def cell(entry: Entry, column: str, settings: ExportSettings) -> str:
    if column == "date":
        return entry.date.strftime(settings.date_format)
    if column == "amount":
        return f"{entry.amount:.2f}"
    return str(getattr(entry, column))


def row(entry: Entry, settings: ExportSettings) -> list[str]:
    return [cell(entry, c, settings) for c in settings.columns]
