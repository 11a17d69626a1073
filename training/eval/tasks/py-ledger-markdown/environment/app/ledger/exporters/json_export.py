import json
from typing import TextIO

from ledger.config import ExportSettings
from ledger.exporters.fields import cell
from ledger.model import Entry


def export(entries: list[Entry], settings: ExportSettings, out: TextIO) -> None:
    records = [
        {c: float(e.amount) if c == "amount" else cell(e, c, settings) for c in settings.columns}
        for e in entries
    ]
    json.dump(records, out, indent=2)
    out.write("\n")
