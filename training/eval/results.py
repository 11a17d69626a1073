"""What one trial left: its reward and how it got there, as `result.json` in its folder.

The run folder is the unit of resumption and of reporting: `run.json` says what was asked
(tasks, attempts, mode, engine), each `<task>/<trial>/result.json` what one trial did. A trial
without its result.json did not finish and runs again on resume.
"""

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from opencomposer.training.errors import TrainingError

Mode = Literal["agent", "oracle"]
TrialKind = Literal["agent", "oracle", "untouched"]


class TrialResult(BaseModel):
    task: str
    category: str
    difficulty: str
    kind: TrialKind
    attempt: int
    reward: float
    passed: bool
    reward_source: str
    problem: str | None = None
    error: str | None = None
    """Why the trial could not run to the verifier (a setup that failed, an engine refusal)."""

    restored: list[str] = Field(default_factory=list)
    detail: dict[str, Any] = Field(default_factory=dict)
    """What the grader reported besides the reward (SWE-bench's status and test lists, a
    reward.json's other keys)."""

    thread_id: str | None = None
    turn_status: str | None = None
    stop_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    steps: int = 0
    """Model calls the agent made."""

    tool_calls: int = 0
    lines_changed: int = 0
    files_changed: int = 0
    setup_seconds: float = 0.0
    agent_seconds: float = 0.0
    verifier_seconds: float = 0.0
    finished_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    task_digest: str | None = None
    """The task folder's digest when the trial ran (a changed task runs again on resume)."""


class RunInfo(BaseModel):
    run_id: str
    mode: Mode
    engine: str
    tasks: list[str]
    """Task folders, absolute."""

    attempts: int
    concurrency: int = 1
    price: tuple[float, float] | None = None
    """Dollars per million prompt and completion tokens, for the report's cost column."""

    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    wall_seconds: float | None = None
    """The whole run's wall time (of its last invocation, when resumed)."""

    trials_run: int | None = None
    """Trials the last invocation ran (the others were reused from an earlier one)."""

    sandbox_start: tuple[float, float] | None = None
    """Median seconds to start bare `bwrap true` and a task's sandbox, measured after the run."""


def write_json_atomically(path: Path, text: str) -> None:
    """Write-then-rename: a trial killed while saving leaves no half a result behind."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def save_result(trial_root: Path, result: TrialResult) -> None:
    write_json_atomically(trial_root / "result.json", result.model_dump_json(indent=2))


def load_result(trial_root: Path) -> TrialResult | None:
    path = trial_root / "result.json"
    try:
        return TrialResult.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValidationError, ValueError):
        return None  # a damaged result is a trial to run again


def load_run(run_dir: Path) -> tuple[RunInfo, list[TrialResult]]:
    """The run's info and every finished trial, in a stable order."""
    try:
        info = RunInfo.model_validate_json((run_dir / "run.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainingError(f"{run_dir} is not a bench run (no run.json)") from None
    except (OSError, ValidationError, ValueError) as exc:
        raise TrainingError(f"{run_dir}/run.json cannot be read: {exc}") from None
    results = []
    for path in sorted(run_dir.glob("*/*/result.json")):
        result = load_result(path.parent)
        if result is not None:
            results.append(result)
    return info, results


def save_run(run_dir: Path, info: RunInfo) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomically(run_dir / "run.json", json.dumps(info.model_dump(mode="json"), indent=2))
