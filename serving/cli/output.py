"""Output for humans (rich, on stdout) and scripts (JSON); diagnostics go to stderr.

Both consoles show control characters as visible escapes (`terminal_text`): every string
rich prints, a table cell or a prompt included, passes through `render_str`, so nothing a
model, a command or a file wrote can move the cursor or rewrite what the user approves.
Untrusted text placed inside markup still needs `rich.markup.escape`.
"""

import json
import os
import sys
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from opencomposer.terminal_text import for_terminal, json_for_terminal


class SafeConsole(Console):
    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(for_terminal(text), **options)


PIPED_WIDTH = 1_000
"""Columns assumed when writing to a pipe or file: rich would take 80, and break a table's
paths and a long message in the middle where the reader (or grep) wants them whole."""


def _width(stream: TextIO) -> int | None:
    """None (rich measures the terminal, or honours COLUMNS) unless `stream` is not one."""
    if "COLUMNS" in os.environ or stream.isatty():
        return None
    return PIPED_WIDTH


out = SafeConsole(highlight=False, width=_width(sys.stdout))
err = SafeConsole(stderr=True, highlight=False, width=_width(sys.stderr))


def print_json(data: Any) -> None:
    # print() rather than rich: JSON must reach pipes byte-exact, without wrapping or markup.
    print(json_for_terminal(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


STATUS_STYLE = {"ok": "green", "warn": "yellow", "missing": "yellow", "error": "red"}
