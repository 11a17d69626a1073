"""Retries with exponential backoff.

`retry(fn)` calls `fn` up to `attempts` times in all. After a failed attempt that will be
followed by another, it waits `base_delay`, then twice that, and so on, never more than
`max_delay`. Only the exceptions in `retry_on` are retried; anything else propagates at
once. When every attempt has failed, RetryError is raised from the last failure.
"""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class RetryError(Exception):
    def __init__(self, attempts: int, last: BaseException) -> None:
        super().__init__(f"gave up after {attempts} attempts: {last!r}")
        self.attempts, self.last = attempts, last


def delays(attempts: int, base_delay: float, max_delay: float) -> list[float]:
    """The waits between `attempts` attempts."""
    out, delay = [], base_delay
    for _ in range(attempts):
        out.append(min(delay, max_delay))
        delay *= 2
    return out


def retry(
    fn: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay: float = 0.5,
    max_delay: float = 8.0,
    retry_on: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError),
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    waits = delays(attempts, base_delay, max_delay)
    for attempt in range(attempts):
        try:
            return fn()
        except retry_on as exc:
            last = exc
            sleep(waits[attempt])
    raise RetryError(attempts, last)
