"""What a training run reports: one JSON object a line, and a progress bar on stderr.

`metrics.jsonl` is the record the plots and any later analysis read; a resumed run appends to
it, dropping the lines past the step it resumes from first, so the file always describes one
run. Rank 0 alone writes; the other ranks get a `TrainLog` that writes nothing.
"""

import json
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

METRICS = "metrics.jsonl"


class TrainLog:
    def __init__(self, out: Path | None, total_steps: int, *, first_step: int = 0) -> None:
        """`out` None: a silent log (ranks other than 0)."""
        self.path = None if out is None else out / METRICS
        self.progress: Progress | None = None
        if self.path is not None:
            out.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
            _truncate_after(self.path, first_step)
            self.progress = Progress(
                TextColumn("[bold]pretrain[/] {task.fields[stage]}"),
                BarColumn(),
                TextColumn("step {task.completed}/{task.total}"),
                TextColumn("{task.fields[status]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self.task = self.progress.add_task(
                "pretrain", total=total_steps, completed=first_step, stage="", status=""
            )

    def __enter__(self) -> "TrainLog":
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.progress is not None:
            self.progress.stop()

    def record(self, entry: dict[str, Any]) -> None:
        """Append one metrics line; a training step's line also moves the bar."""
        if self.path is None:
            return
        with self.path.open("a") as stream:
            stream.write(json.dumps(entry) + "\n")
        if self.progress is not None and "loss" in entry:
            status = f"loss {entry['loss']:.3f}  {entry['tokens_per_s']:,.0f} tok/s"
            self.progress.update(
                self.task, completed=entry["step"] + 1, stage=entry["stage"], status=status
            )

    def note(self, message: str) -> None:
        """A line above the bar (stage switches, checkpoints, validation)."""
        if self.progress is not None:
            self.progress.console.print(message)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _truncate_after(path: Path, first_step: int) -> None:
    """Keep the lines of steps before `first_step` (all of them are gone for a fresh run)."""
    if not path.exists():
        return
    kept = [e for e in read_metrics(path) if e["step"] < first_step]
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))
