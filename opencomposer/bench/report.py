"""Benchmark rows for people (a table under a heading) or scripts (JSON with the run's info),
on the CLI's consoles: one layout for every `opencomposer ... bench` command."""

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from opencomposer.bench.rows import Row, figure
from opencomposer.serving.cli.output import out, print_json


def print_bench(rows: Sequence[Row], info: dict[str, Any], heading: str, as_json: bool) -> None:
    """Benchmark rows as JSON (with the run's `info`) or as a table under `heading`."""
    if as_json:
        print_json({**info, "rows": [row.to_json() for row in rows]})
        return
    out.print(heading)
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("measurement", "baseline", "", "ours", "ours / baseline", "note"):
        table.add_column(column, overflow="fold")
    for row in rows:
        ratio = f"{row.ratio:.3g}x" if row.ratio is not None else "-"
        table.add_row(
            row.name,
            row.baseline_label,
            figure(row.baseline, row.unit),
            figure(row.ours, row.unit),
            ratio,
            row.note,
        )
    out.print(table)
