"""A GitHub-style pipe table, the amount column right-aligned."""

from typing import TextIO

from ledger.config import ExportSettings
from ledger.exporters.fields import row
from ledger.model import Entry


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |\n"


def export(entries: list[Entry], settings: ExportSettings, out: TextIO) -> None:
    out.write(_line([_escape(c) for c in settings.columns]))
    out.write(_line(["---:" if c == "amount" else "---" for c in settings.columns]))
    for entry in entries:
        out.write(_line([_escape(c) for c in row(entry, settings)]))
