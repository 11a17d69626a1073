"""Output for humans (rich, on stdout) and scripts (JSON); diagnostics go to stderr.

Both consoles show control characters as visible escapes (`terminal_text`): every string
rich prints, a table cell or a prompt included, passes through `render_str`, so nothing a
model, a command or a file wrote can move the cursor or rewrite what the user approves.
Untrusted text placed inside markup still needs `rich.markup.escape`.
"""

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from opencomposer.benchmark import Row, figure
from opencomposer.terminal_text import for_terminal, json_for_terminal


class SafeConsole(Console):
    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(for_terminal(text), **options)


out = SafeConsole(highlight=False)
err = SafeConsole(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    # print() rather than rich: JSON must reach pipes byte-exact, without wrapping or markup.
    print(json_for_terminal(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


STATUS_STYLE = {"ok": "green", "warn": "yellow", "missing": "yellow", "error": "red"}


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
