"""The built-in suite: every task well-formed, and every task valid by its oracle (the solution
passes, the untouched repository fails), checked in the sandbox as `bench run --oracle` does."""

from pathlib import Path

import pytest

from opencomposer.training.eval.report import oracle_checks
from opencomposer.training.eval.task import BUILTIN_TASKS, CATEGORIES, discover_tasks, load_task

from .bench_fixtures import run_bench

TASKS = discover_tasks([BUILTIN_TASKS])


def test_the_suite_spans_the_categories_and_languages():
    tasks = [load_task(folder) for folder in TASKS]
    assert len(tasks) >= 20
    assert {task.category for task in tasks} == set(CATEGORIES)
    assert {"python", "javascript", "shell"} <= {t.config.metadata.language for t in tasks}


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
    """The hidden test files (test_*.py, *.test.js ...), not the verifier's other files."""
    found = (folder / "tests").rglob("*")
    return [
        p.name for p in found if "test" in p.stem.split("_")[0].split(".") and p.name != "test.sh"
    ]


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
@pytest.mark.timeout(900)
async def test_every_task_passes_its_oracle_check(outside: Path):
    run = await run_bench(outside, TASKS, mode="oracle")
    invalid = [check for check in oracle_checks(run.results) if not check.valid]
    assert not invalid, "\n".join(f"{c.task}: {c.problem}" for c in invalid)
