"""`opencomposer bench generate` (tasks made by breaking pinned PyPI sdists, SWE-smith's way)
and `opencomposer bench import` (SWE-bench jsonl instances, from the user's clones)."""

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from opencomposer.serving.cli.options import ConfigOverrides, Json, overrides_from, settings_for
from opencomposer.serving.cli.output import err, out, print_json
from opencomposer.training.errors import TrainingError

SWE_BENCH_LINES = "7-10"
CURSORBENCH_LINES = 181
"""Median lines changed by the reference fix: public SWE-bench sets, and CursorBench (the
report, §9)."""


def generate(
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder the tasks are written to (one per task).")
    ] = Path("bench-tasks/generated"),
    package: Annotated[
        list[str] | None,
        typer.Option("--package", help="Source packages to break (repeatable; default: all)."),
    ] = None,
    per_package: Annotated[int, typer.Option(min=1, help="Single-mutation tasks per package.")] = 8,
    combined: Annotated[
        int, typer.Option(min=0, help="Tasks per package combining two or three bugs.")
    ] = 3,
    seed: Annotated[int, typer.Option(help="Which mutations are tried, and in what order.")] = 0,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Test runs at once (default: the CPU count).")
    ] = None,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """Break real projects and keep what their own tests catch: each task's FAIL_TO_PASS and
    PASS_TO_PASS come from runs in the sandbox; the oracle is the reverse of the bug. Prints
    the distribution of the suite's oracle diffs beside SWE-bench's and CursorBench's."""
    from opencomposer.training.eval.smith.generate import (
        SUMMARY,
        GenerateOptions,
        SmithGenerator,
        distribution,
    )
    from opencomposer.training.eval.smith.packages import PACKAGES, package_named

    settings = settings_for(None, overrides_from(config)).settings
    packages = [package_named(name) for name in package] if package else list(PACKAGES)
    options = GenerateOptions(
        per_package=per_package,
        combined=combined,
        seed=seed,
        concurrency=concurrency or max(1, os.cpu_count() or 1),
    )
    generator = SmithGenerator(
        out_dir.resolve(),
        cache=settings.home / "bench" / "sdists",
        data_dir=settings.home,
        options=options,
        progress=lambda line: err.print(escape(line)),
    )
    reports = asyncio.run(generator.generate(packages))
    figures = distribution(out_dir)
    summary = {"packages": [vars(r) for r in reports], "distribution": figures}
    (out_dir / SUMMARY).write_text(_json_text(summary), encoding="utf-8")
    if json:
        print_json(summary)
        return
    table = Table("package", "tests", "tried", "kept", "rejected")
    for report in reports:
        rejected = ", ".join(f"{why}: {n}" for why, n in sorted(report.rejected.items()))
        table.add_row(
            report.package,
            str(report.baseline_tests),
            str(report.tried),
            str(report.kept),
            escape(rejected),
        )
    out.print(table)
    if figures.get("tasks"):
        out.print(
            f"{figures['tasks']} tasks in {escape(str(out_dir))} "
            f"({figures['multi_file_tasks']} across several files); oracle diff median "
            f"{figures['median_lines_changed']:g} lines (max {figures['max_lines_changed']}) "
            f"beside SWE-bench's {SWE_BENCH_LINES} and CursorBench's {CURSORBENCH_LINES}; "
            f"files touched median {figures['median_files_touched']:g} "
            f"(max {figures['max_files_touched']}); tests failing median "
            f"{figures['median_tests_failing']:g}"
        )


def import_swebench(
    instances: Annotated[
        Path, typer.Argument(help="A SWE-bench jsonl file (one instance per line).")
    ],
    repos: Annotated[
        Path,
        typer.Option(
            help="Folder of the clones: OWNER__NAME, OWNER/NAME or NAME for each instance's repo."
        ),
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder the tasks are written to.")] = Path(
        "bench-tasks/swe-bench"
    ),
) -> None:
    """SWE-bench instances as bench tasks: the base commit's files (no history), its test
    patch applied by the verifier and graded by SWE-bench's parser, the gold patch as oracle."""
    from opencomposer.training.eval.smith.swebench_import import import_instance, read_instances

    parsed, problems = read_instances(instances)
    for problem in problems:
        name = problem.instance_id or "?"
        err.print(f"[red]line {problem.line} ({escape(name)}): {escape(problem.problem)}[/red]")
    made = failed = 0
    for instance in parsed:
        try:
            import_instance(instance, repos, out_dir)
            made += 1
        except TrainingError as exc:
            err.print(f"[red]{escape(instance.instance_id)}: {escape(str(exc))}[/red]")
            failed += 1
    out.print(f"{made} tasks in {escape(str(out_dir))}")
    if problems or failed:
        raise typer.Exit(1)


def _json_text(data: object) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"
