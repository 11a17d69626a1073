"""One row of a benchmark: a figure of ours beside the baseline it is judged against.

Every `opencomposer ... bench` command prints its results as these rows, so a reader always
finds the baseline, our figure and the ratio in the same columns, measured in the same run.
"""

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Row:
    name: str
    baseline_label: str
    baseline: float | None
    ours: float | None
    """None: not measured here (the note says why)."""

    unit: str
    """`s` (shown in ms), `items/s`, `tok/s`, `tokens`, `%`, `KB` or `MB`."""

    note: str = ""
    identical: bool | None = None
    """For comparisons of outputs: whether both sides produced the same result."""

    @property
    def ratio(self) -> float | None:
        return self.ours / self.baseline if self.ours is not None and self.baseline else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


def figure(value: float | None, unit: str) -> str:
    """A figure for people: seconds in milliseconds, rates and sizes without false precision."""
    if value is None:
        return "n/a"
    if unit == "s":
        ms = value * 1000
        return f"{ms:.2f} ms" if ms >= 1 else f"{ms:.3g} ms"
    if unit == "%":
        return f"{value:.0f}%"
    if value >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:.3g} {unit}"


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (`q` in 0..1) of `values`."""
    ordered = sorted(values)
    return ordered[max(min(math.ceil(q * len(ordered)) - 1, len(ordered) - 1), 0)]
