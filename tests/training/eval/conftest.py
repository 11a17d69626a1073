"""Small tasks written on the spot, in the bench's format, for the runner and its guards."""

from pathlib import Path

import pytest
from support.bench_tasks import CALC_TESTS, write_task
from support.sandbox_fixtures import bwrap, outside  # noqa: F401 (fixtures)


@pytest.fixture
def bench_root(tmp_path: Path) -> Path:
    """Where a test's tasks and runs live. Runs that start sandboxes use `outside` instead:
    /tmp is private inside the sandbox, so hiding a folder under it would prove nothing."""
    return tmp_path


@pytest.fixture
def calc_task(bench_root: Path) -> Path:
    """A one-line bug graded by hidden pytest tests, with the conftest.py guarded."""
    return write_task(
        bench_root / "tasks",
        "calc-add",
        instruction="add() is wrong; please fix calc-add.",
        app={"calc.py": "def add(a, b):\n    return a - b\n"},
        tests=CALC_TESTS,
        solution={"calc.py": "def add(a, b):\n    return a + b\n"},
        toml="""
            [verifier]
            timeout_sec = 60.0
            protected_paths = ["**/conftest.py", "pytest.ini"]
        """,
    )


@pytest.fixture
def value_task(bench_root: Path) -> Path:
    """Graded by a shell check alone: value.txt must say 2."""
    return write_task(
        bench_root / "tasks",
        "value-two",
        instruction="The value should be two (value-two).",
        app={"value.txt": "1\n"},
        tests={
            "test.sh": '[ "$(cat /app/value.txt)" = 2 ] || { echo 0 > /logs/verifier/reward.txt;'
            " exit 1; }\necho 1 > /logs/verifier/reward.txt\n"
        },
        solution={"value.txt": "2\n"},
    )
