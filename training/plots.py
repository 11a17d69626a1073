"""PNG plots of a run's metrics.jsonl: loss (train and held-out) and throughput against
tokens seen, and expert balance (max / mean load per MoE layer) against step.

Figures are built with matplotlib's object API (no pyplot, no global figure state), which
renders through Agg: no display needed, the same on a laptop and a training node.
"""

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
