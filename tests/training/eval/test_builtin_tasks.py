"""The built-in suite: every task well-formed, and every task valid by its oracle (the solution
passes, the untouched repository fails), checked in the sandbox as `bench run --oracle` does."""

import shutil
from pathlib import Path

import pytest
from support.bench_fixtures import run_bench

from opencomposer.training.eval.report import oracle_checks
from opencomposer.training.eval.task import BUILTIN_TASKS, CATEGORIES, discover_tasks, load_task

TASKS = discover_tasks([BUILTIN_TASKS])
GO_TASKS = [folder for folder in TASKS if load_task(folder).config.metadata.language == "go"]
"""Their tests need the go toolchain (Debian's golang-go, which `make test` installs)."""


def test_the_suite_spans_the_categories_and_languages():
    tasks = [load_task(folder) for folder in TASKS]
    assert len(tasks) >= 30
    assert {task.category for task in tasks} == set(CATEGORIES)
    assert {"python", "javascript", "shell", "go"} <= {t.config.metadata.language for t in tasks}


@pytest.mark.parametrize("folder", TASKS, ids=[folder.name for folder in TASKS])
def test_each_task_is_well_formed(folder: Path):
    task = load_task(folder)
    assert task.warnings == [] and task.has_solution
    assert task.category in CATEGORIES and task.config.metadata.language
    assert not task.config.environment.allow_internet
    # Harbor builds the environment from the Dockerfile: it must run setup.sh too.
    dockerfile = (folder / "environment" / "Dockerfile").read_text()
    if task.setup_script.is_file():
        assert "setup.sh" in dockerfile
    # Terse, as users write; the tests are never named.
    assert len(task.instruction) < 1200
    assert not any(name in task.instruction for name in _test_files(folder))


def _test_files(folder: Path) -> list[str]:
    """The hidden test files (test_*.py, *.test.js, *_test.go ...), not the verifier's other
    files."""
    found = (folder / "tests").rglob("*")
    return [
        p.name
        for p in found
        if ("test" in p.stem.split("_")[0].split(".") or p.name.endswith("_test.go"))
        and p.name != "test.sh"
    ]


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "tasks",
    [
        pytest.param([folder for folder in TASKS if folder not in GO_TASKS], id="all-but-go"),
        pytest.param(
            GO_TASKS,
            id="go",
            marks=pytest.mark.skipif(
                shutil.which("go") is None,
                reason="the Go tasks need go on PATH (apt-get install golang-go; make test does)",
            ),
        ),
    ],
)
async def test_every_task_passes_its_oracle_check(outside: Path, tasks: list[Path]):
    run = await run_bench(outside, tasks, mode="oracle")
    invalid = [check for check in oracle_checks(run.results) if not check.valid]
    assert not invalid, "\n".join(f"{c.task}: {c.problem}" for c in invalid)
