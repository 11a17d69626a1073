"""A bench run in-process: the real runner, runtime and tool harness, a playbook engine."""

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings
from opencomposer.serving.engines.base import Engine
from opencomposer.training.eval.results import Mode, RunInfo, TrialResult
from opencomposer.training.eval.runner import BenchRunner, bench_settings, hidden_paths
from opencomposer.training.eval.task import load_task
from support.playbook_engine import PlaybookEngine, Step

CLI = str(Path(sys.executable).parent / "opencomposer")


def bench(*args: str, rc: int = 0, timeout: float = 300) -> subprocess.CompletedProcess:
    """`opencomposer bench ARGS` in a process of its own, as a user runs it."""
    proc = subprocess.run(
        [CLI, "bench", *args], capture_output=True, text=True, timeout=timeout, env=os.environ
    )
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


@dataclass
class BenchRun:
    results: list[TrialResult]
    engine: Engine
    run_dir: Path
    outcomes: dict[str, list[dict]]
    """Thread id -> the outcomes the trace store holds for it."""


async def run_bench(
    root: Path,
    tasks: Sequence[Path],
    plays: dict[str, list[Step]] | None = None,
    *,
    mode: Mode = "agent",
    attempts: int = 1,
    run_dir: Path | None = None,
    engine: Engine | None = None,
) -> BenchRun:
    """`root` holds the run folder and opencomposer's home; it should be visible from inside
    the sandbox (not under /tmp, which is private there), so that hiding is what is tested."""
    loaded = [load_task(task) for task in tasks]
    run_dir = run_dir or root / "run"
    settings = Settings(home=root / "home", models_dir=root / "models")
    engine = engine or PlaybookEngine(plays or {})
    runtime = None
    if mode == "agent":
        runtime = AgentRuntime(bench_settings(settings, hidden_paths(run_dir, loaded)), engine)
    runner = BenchRunner(run_dir, loaded, data_dir=settings.home, runtime=runtime, concurrency=2)
    info = RunInfo(
        run_id=run_dir.name,
        mode=mode,
        engine="playbook",
        tasks=[str(task.root) for task in loaded],
        attempts=attempts,
    )
    try:
        results = await runner.run(info)
        outcomes = {}
        if runtime is not None:
            for result in results:
                if result.thread_id is not None:
                    found = runtime.store.outcomes(result.thread_id)
                    outcomes[result.thread_id] = [
                        {"kind": o.kind, **(o.detail or {})} for o in found
                    ]
    finally:
        if runtime is not None:
            await runtime.close()
    return BenchRun(results, engine, run_dir, outcomes)
