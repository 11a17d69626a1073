"""Export formats: each a function (entries, settings, out) writing to the text stream `out`."""

from collections.abc import Callable
from typing import TextIO

from ledger.config import ExportSettings
from ledger.exporters import csv_export, json_export
from ledger.model import Entry

Exporter = Callable[[list[Entry], ExportSettings, TextIO], None]

EXPORTERS: dict[str, Exporter] = {
    "csv": csv_export.export,
    "json": json_export.export,
}


def get_exporter(name: str) -> Exporter:
    try:
        return EXPORTERS[name]
    except KeyError:
        raise ValueError(f"unknown export format {name!r}") from None
