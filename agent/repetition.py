"""Stops a turn whose model repeats itself: the same failing call, or text stuck in a loop.

Only failures count: polling a job, re-running tests or re-reading a file succeed and are
normal. A call counts as a repeat when the tool, its arguments (compared as parsed JSON, so
spacing does not matter) and its error are all the same as the previous call's. The model is
warned one repeat before the limit, so it can change course before the turn is stopped.

Text loops are what a small model does when it has lost its way: the same line, or the same
few words, over and over until the step's token cap (at a few tokens a second on a CPU, many
minutes of it). `TextLoopDetector` watches the stream and says so once its tail is one piece
repeated, so the step can be cut while it is still cheap.
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


@dataclass
class TextLoopDetector:
    """Whether a stream of text has fallen into a loop: its last `min_chars` characters (or
    `min_repeats` pieces, if that is longer) are one piece of at most `max_period` characters
    repeated. Exact repeats only: a numbered list or a table of different values is not a
    loop. `min_chars` of 0 turns detection off."""

    min_chars: int
    min_repeats: int = 4
    max_period: int = 400
    check_every: int = 32
    """Characters between checks: a loop is found within this many of reaching its span."""

    _tail: str = ""
    _unchecked: int = 0

    @property
    def _keep(self) -> int:
        return max(self.min_chars, self.min_repeats * self.max_period)

    def feed(self, text: str) -> bool:
        """Take the next piece of the stream; true once the stream is looping."""
        if not self.min_chars or not text:
            return False
        self._tail = (self._tail + text)[-self._keep :]
        self._unchecked += len(text)
        if self._unchecked < self.check_every:
            return False
        self._unchecked = 0
        return self.period() is not None

    def period(self) -> int | None:
        """The length of the piece the tail repeats, if it is looping."""
        tail = self._tail
        for period in range(1, self.max_period + 1):
            span = max(self.min_chars, self.min_repeats * period)
            if span > len(tail):
                return None  # spans only grow with the period
            # Cheap test first (the last piece equals the one before it), then the whole span.
            if tail[-period:] == tail[-2 * period : -period] and (
                tail[-span + period :] == tail[-span:-period]
            ):
                return period
        return None
