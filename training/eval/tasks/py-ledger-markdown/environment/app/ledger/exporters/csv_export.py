import csv
from typing import TextIO

from ledger.config import ExportSettings
from ledger.exporters.fields import row
from ledger.model import Entry


def export(entries: list[Entry], settings: ExportSettings, out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(settings.columns)
    for entry in entries:
        writer.writerow(row(entry, settings))
