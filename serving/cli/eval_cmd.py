"""`opencomposer bench list|run|report|compare`: the evaluation bench.

`run` takes task folders (the built-in suite by default), runs each in the sandbox with the
configured engine (`--engine` any backend) or its oracle (`--oracle`), saves every trial in the
run folder as it ends (run it again to resume), and writes report.md with its plots there.
"""

import asyncio
import fnmatch
import os
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from opencomposer.serving.cli.options import (
    FLAG,
    ConfigOverrides,
    EngineSpec,
    Json,
    engine_overrides,
    given,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err, out, print_json
from opencomposer.training.errors import TrainingError

if TYPE_CHECKING:
    from opencomposer.config import Settings
    from opencomposer.training.eval.results import RunInfo, TrialResult
    from opencomposer.training.eval.runner import Budget
    from opencomposer.training.eval.task import Task

TaskPaths = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Task folders, or folders holding them (default: the built-in suite).",
        metavar="[TASKS]...",
        show_default=False,
    ),
]
Only = Annotated[
    list[str] | None,
    typer.Option("--only", help="Task names to keep (shell patterns; repeatable)."),
]


def _task_folders(paths: list[Path] | None, only: list[str] | None) -> list[Path]:
    from opencomposer.training.eval.task import BUILTIN_TASKS, discover_tasks

    roots = paths or [BUILTIN_TASKS]
    for root in roots:
        if not root.exists():
            raise TrainingError(f"{root} does not exist")
    folders = discover_tasks(roots)
    if only:
        folders = [f for f in folders if any(fnmatch.fnmatchcase(f.name, p) for p in only)]
    if not folders:
        raise TrainingError("no tasks found (a task is a folder with a task.toml)")
    return folders


def list_tasks(paths: TaskPaths = None, only: Only = None, json: Json = False) -> None:
    """The tasks, checked: category, difficulty, language, and what is wrong with any."""
    from opencomposer.training.eval.task import TaskError, load_task

    rows: list[dict[str, Any]] = []
    for folder in _task_folders(paths, only):
        try:
            task = load_task(folder)
        except TaskError as exc:
            rows.append({"task": folder.name, "path": str(folder), "problems": exc.problems})
            continue
        meta = task.config.metadata
        rows.append(
            {
                "task": task.name,
                "path": str(task.root),
                "category": meta.category,
                "difficulty": meta.difficulty,
                "language": meta.language,
                "warnings": task.warnings,
            }
        )
    if json:
        print_json(rows)
    else:
        table = Table("task", "category", "difficulty", "language", "notes")
        for row in rows:
            notes = row.get("problems") or row.get("warnings") or []
            style = "red" if "problems" in row else None
            table.add_row(
                escape(str(row["task"])),
                str(row.get("category", "")),
                str(row.get("difficulty", "")),
                str(row.get("language") or ""),
                escape("; ".join(notes)),
                style=style,
            )
        out.print(table)
    if any("problems" in row for row in rows):
        raise typer.Exit(1)


def run(
    paths: TaskPaths = None,
    only: Only = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="The run folder (default: bench-runs/RUN_ID here)."),
    ] = None,
    oracle: Annotated[
        bool,
        typer.Option(
            "--oracle",
            help="Validate the tasks: each oracle solution must pass, each untouched "
            "repository fail.",
            metavar=FLAG,
        ),
    ] = False,
    oracle_agent: Annotated[
        bool,
        typer.Option(
            "--oracle-agent",
            help="The agent runtime with a scripted engine that applies each task's solution "
            "through the agent's tools: the upper bound the harness allows.",
            metavar=FLAG,
        ),
    ] = False,
    engine: EngineSpec = None,
    model: Annotated[str | None, typer.Option(help="Model id (sets engine.model).")] = None,
    attempts: Annotated[int, typer.Option(min=1, help="Trials per task (for pass@k).")] = 1,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Trials at once (default: the CPU count).")
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(min=1, help="Model calls one trial may make.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="Tokens one trial may spend.")
    ] = None,
    restart: Annotated[
        bool, typer.Option("--restart", help="Run finished trials again.", metavar=FLAG)
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Run the trials on Ray workers, one per --concurrency: 'local' starts Ray "
            "here; else a cluster address (auto, HOST:PORT, ray://HOST:PORT). Needs the run "
            "and task folders at the same paths on every node.",
        ),
    ] = None,
    price: Annotated[
        str | None,
        typer.Option(
            metavar="IN,OUT",
            help="Dollars per million prompt and completion tokens, for a cost column.",
        ),
    ] = None,
    config: ConfigOverrides = None,
) -> None:
    """Run the tasks with the agent (or their oracles) and grade every trial."""
    from opencomposer.training.eval.report import oracle_checks
    from opencomposer.training.eval.results import RunInfo
    from opencomposer.training.eval.runner import Budget
    from opencomposer.training.eval.task import load_task

    tasks = [load_task(folder) for folder in _task_folders(paths, only)]
    overrides = overrides_from(config, **engine_overrides(engine) | given({"engine.model": model}))
    settings = settings_for(None, overrides).settings
    run_dir = (out_dir or Path("bench-runs") / _run_id()).resolve()
    mode: Literal["agent", "oracle"] = "oracle" if oracle else "agent"
    if oracle and oracle_agent:
        raise TrainingError("--oracle checks the tasks, --oracle-agent the harness: pick one")
    engine_name = "oracle" if oracle else f"{settings.engine.backend}:{settings.engine.model}"
    if oracle_agent:
        if ray is not None:
            raise TrainingError("--oracle-agent runs here, not on Ray workers")
        engine_name = "oracle-agent"
    info = RunInfo(
        run_id=run_dir.name,
        mode=mode,
        engine=engine_name,
        tasks=[str(task.root) for task in tasks],
        attempts=1 if oracle else attempts,
        concurrency=concurrency or max(1, os.cpu_count() or 1),
        price=_price(price),
    )
    results = asyncio.run(
        _run(settings, run_dir, tasks, info, Budget(max_steps, max_tokens), restart, ray)
    )
    _write_report(run_dir)
    out.print(f"run folder: {escape(str(run_dir))}")
    if oracle and not all(check.valid for check in oracle_checks(results)):
        raise typer.Exit(1)


async def _run(
    settings: "Settings",
    run_dir: Path,
    tasks: "list[Task]",
    info: "RunInfo",
    budget: "Budget",
    restart: bool,
    ray: str | None,
) -> "list[TrialResult]":
    from opencomposer.agent.runtime import AgentRuntime
    from opencomposer.serving.engines import make_engine
    from opencomposer.serving.engines.base import Engine
    from opencomposer.training.eval.oracle_engine import OracleEngine
    from opencomposer.training.eval.ray_trials import run_on_ray
    from opencomposer.training.eval.runner import BenchRunner, bench_settings, hidden_paths

    runtime: AgentRuntime | None = None
    engine: Engine | None = None
    if info.mode == "agent" and ray is None:  # Ray workers build their own
        agent_settings = bench_settings(settings, hidden_paths(run_dir, tasks))
        engine = (
            OracleEngine(tasks)
            if info.engine == "oracle-agent"
            else make_engine(agent_settings.engine, agent_settings.models_dir)
        )
        runtime = AgentRuntime(agent_settings, engine)
    runner = BenchRunner(
        run_dir,
        tasks,
        data_dir=settings.home,
        runtime=runtime,
        budget=budget,
        concurrency=info.concurrency,
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("passed {task.fields[passed]}"),
        TimeElapsedColumn(),
    )
    total = len(tasks) * (2 if info.mode == "oracle" else info.attempts)
    try:
        with Progress(*columns, console=err, transient=False) as progress:
            bar = progress.add_task(f"{info.mode} trials", total=total, passed=0)
            passed = 0

            def done(result: "TrialResult") -> None:
                nonlocal passed
                passed += result.passed
                progress.update(bar, advance=1, passed=passed)
                if result.error:
                    progress.console.print(
                        f"[yellow]{escape(result.task)} {result.kind}: {escape(result.error)}[/]"
                    )

            started = time.monotonic()
            if ray is None:
                results = await runner.run(info, on_result=done, restart=restart)
            else:
                results = await run_on_ray(
                    ray,
                    runner,
                    info,
                    settings,
                    workers=info.concurrency,
                    on_result=done,
                    restart=restart,
                )
            info.wall_seconds = time.monotonic() - started
            info.trials_run = len(results) - runner.reused
        await _measure_sandbox_start(info, run_dir, settings.home)
        return results
    finally:
        if runtime is not None:
            await runtime.close()
        if engine is not None:
            await engine.aclose()


def _price(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        prompt, completion = (float(part) for part in text.split(","))
    except ValueError:
        raise typer.BadParameter(
            "give two numbers, IN,OUT (e.g. 0.5,2)", param_hint="--price"
        ) from None
    if not (prompt >= 0 and completion >= 0):
        raise typer.BadParameter("prices cannot be negative", param_hint="--price")
    return prompt, completion


async def _measure_sandbox_start(info: "RunInfo", run_dir: Path, data_dir: Path) -> None:
    """The run's sandbox start cost beside bare bubblewrap's, kept with the run's info."""
    from opencomposer.training.eval.results import save_run
    from opencomposer.training.eval.sandboxed import start_cost

    with tempfile.TemporaryDirectory(dir=run_dir, prefix=".sandbox-start-") as scratch:
        cost = await start_cost(data_dir, Path(scratch))
    info.sandbox_start = (cost.bare, cost.task)
    save_run(run_dir, info)


def _run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _write_report(run_dir: Path) -> str:
    from opencomposer.training.eval.report import markdown_report, write_plots
    from opencomposer.training.eval.results import load_run

    info, results = load_run(run_dir)
    plots = None
    if info.mode == "agent" and results:
        write_plots(results, run_dir)
        plots = run_dir
    text = markdown_report(info, results, plots)
    (run_dir / "report.md").write_text(text, encoding="utf-8")
    out.print(text, markup=False, highlight=False)
    return text


RunDir = Annotated[Path, typer.Argument(help="A bench run folder.", exists=True, file_okay=False)]


def report(run_dir: RunDir) -> None:
    """Print a run's report (pass@k, tokens, steps, tool calls, time per task and category)
    and write report.md with its plots into the run folder."""
    _write_report(run_dir)


def compare(before: RunDir, after: RunDir) -> None:
    """Two runs side by side: pass@1 per task and the tasks that flipped."""
    from opencomposer.training.eval.report import comparison_markdown
    from opencomposer.training.eval.results import load_run

    (_, first), (_, second) = load_run(before), load_run(after)
    text = comparison_markdown((before.name, after.name), first, second)
    out.print(text, markup=False, highlight=False)
