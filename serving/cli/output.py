"""Output for humans (rich, on stdout) and scripts (JSON); diagnostics go to stderr."""

import json
from typing import Any

from rich.console import Console

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    # print() rather than rich: JSON must reach pipes byte-exact, without wrapping or markup.
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


STATUS_STYLE = {"ok": "green", "warn": "yellow", "missing": "yellow", "error": "red"}
