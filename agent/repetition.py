"""Stops a turn that keeps making the same failing call.

Only failures count: polling a job, re-running tests or re-reading a file succeed and are
normal. A call counts as a repeat when the tool, its arguments (compared as parsed JSON, so
spacing does not matter) and its error are all the same as the previous call's. The model is
warned one repeat before the limit, so it can change course before the turn is stopped.
"""

import json
from dataclasses import dataclass
from enum import Enum


class Repetition(Enum):
    fine = "fine"
    warn = "warn"
    stop = "stop"


WARNING = (
    "\n[You have made this same failing call {count} times in a row. Do something "
    "different: read the error, check your assumptions, or try another approach. One "
    "more identical failure stops the turn.]"
)


@dataclass
class RepetitionGuard:
    limit: int
    _last: tuple[str, str, str] | None = None
    _count: int = 0

    def observe(self, tool: str, arguments: str, ok: bool, error: str | None) -> Repetition:
        if ok:
            self._last, self._count = None, 0
            return Repetition.fine
        key = (tool, _canonical(arguments), error or "")
        self._count = self._count + 1 if key == self._last else 1
        self._last = key
        if self._count >= self.limit:
            return Repetition.stop
        return Repetition.warn if self._count == self.limit - 1 > 1 else Repetition.fine

    @property
    def count(self) -> int:
        return self._count


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments
