"""PNG plots of a run's metrics.jsonl: loss (train and held-out) and throughput against
tokens seen, and expert balance (max / mean load per MoE layer) against step; and the same
figures for several runs on one set of axes (with and without bias updates, one process and
two), with the figures that compare them.

Figures are built with matplotlib's object API (no pyplot, no global figure state), which
renders through Agg: no display needed, the same on a laptop and a training node.
"""

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from opencomposer.training.train_log import read_metrics


def plot_run(metrics: Path, into: Path) -> list[Path]:
    """Write loss.png, throughput.png and expert_balance.png into `into`; returns them."""
    entries = read_metrics(metrics)
    train = [e for e in entries if "loss" in e]
    val = [e for e in entries if "val_loss" in e]
    into.mkdir(parents=True, exist_ok=True)
    return [
        _plot(
            into / "loss.png",
            "tokens",
            "loss",
            {
                "train": _series(train, "tokens", "loss"),
                "held-out": _series(val, "tokens", "val_loss"),
            },
        ),
        _plot(
            into / "throughput.png",
            "tokens",
            "tokens / s",
            {"train": _series(train, "tokens", "tokens_per_s")},
        ),
        _plot(
            into / "expert_balance.png",
            "step",
            "max / mean expert load",
            {
                f"MoE layer {i}": _series(
                    [{"step": e["step"], "x": e["expert_max_mean"][i]} for e in train], "step", "x"
                )
                for i in range(len(train[0]["expert_max_mean"]) if train else 0)
            },
        ),
    ]


@dataclass(frozen=True)
class RunSummary:
    label: str
    steps: int
    tokens: int
    final_val_loss: float | None
    tokens_per_second: float
    """Median over the run's steps (the first steps pay for warm-up)."""
    expert_max_mean: float | None
    """Max / mean expert load over the last tenth of the steps, averaged over MoE layers."""


def summarize(label: str, metrics: Path) -> RunSummary:
    entries = read_metrics(metrics)
    train = [e for e in entries if "loss" in e]
    val = [e for e in entries if "val_loss" in e]
    balance = [_mean_balance(e) for e in train[-max(1, len(train) // 10) :]]
    loads = [b for b in balance if b is not None]
    return RunSummary(
        label=label,
        steps=len(train),
        tokens=train[-1]["tokens"] if train else 0,
        final_val_loss=val[-1]["val_loss"] if val else None,
        tokens_per_second=statistics.median(e["tokens_per_s"] for e in train) if train else 0.0,
        expert_max_mean=statistics.fmean(loads) if loads else None,
    )


def plot_comparison(runs: dict[str, Path], into: Path) -> list[Path]:
    """Write compare_loss.png, compare_throughput.png and compare_expert_balance.png: one line
    per run (label -> its metrics.jsonl), expert balance averaged over the MoE layers."""
    series = {label: read_metrics(path) for label, path in runs.items()}
    into.mkdir(parents=True, exist_ok=True)
    train = {label: [e for e in entries if "loss" in e] for label, entries in series.items()}
    return [
        _plot(
            into / "compare_loss.png",
            "tokens",
            "held-out loss",
            {
                label: _series([e for e in entries if "val_loss" in e], "tokens", "val_loss")
                for label, entries in series.items()
            },
        ),
        _plot(
            into / "compare_throughput.png",
            "step",
            "tokens / s",
            {label: _series(entries, "step", "tokens_per_s") for label, entries in train.items()},
        ),
        _plot(
            into / "compare_expert_balance.png",
            "step",
            "max / mean expert load (mean of MoE layers)",
            {label: _balance_series(entries) for label, entries in train.items()},
        ),
    ]


def _balance_series(entries: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    points = [(e["step"], b) for e in entries if (b := _mean_balance(e)) is not None]
    return [step for step, _ in points], [b for _, b in points]


def _mean_balance(entry: dict[str, Any]) -> float | None:
    loads = entry.get("expert_max_mean") or []
    return statistics.fmean(loads) if loads else None


def _series(entries: list[dict[str, Any]], x: str, y: str) -> tuple[list[float], list[float]]:
    return [e[x] for e in entries], [e[y] for e in entries]


def _plot(
    path: Path, xlabel: str, ylabel: str, lines: dict[str, tuple[list[float], list[float]]]
) -> Path:
    figure = Figure(figsize=(7, 4), dpi=100)
    axes = figure.subplots()
    for label, (xs, ys) in lines.items():
        if xs:
            axes.plot(xs, ys, label=label, marker="o" if len(xs) < 20 else None)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    if any(xs for xs, _ in lines.values()):
        axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    return path
