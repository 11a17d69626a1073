"""Small tasks written on the spot, in the bench's format, for the runner, its guards and the
reward's security tests."""

import textwrap
from pathlib import Path

PYTEST_TEST_SH = """\
#!/bin/bash
cd /app
python3 -P -m pytest -c /tests/pytest.ini --rootdir=/tests -q /tests
status=$?
echo $(( status == 0 )) > /logs/verifier/reward.txt
exit "$status"
"""

CALC_TESTS = {
    "test.sh": PYTEST_TEST_SH,
    "conftest.py": 'import sys\n\nsys.path.append("/app")\n',
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if name.endswith(".toml") else text)


def write_task(
    root: Path,
    name: str,
    *,
    instruction: str,
    app: dict[str, str],
    tests: dict[str, str],
    solution: dict[str, str] | None = None,
    toml: str = "",
    setup: str | None = None,
) -> Path:
    """A task folder: `solution` files are copied over the repository by solve.sh."""
    task = root / name
    write_files(task / "environment" / "app", app)
    if setup is not None:
        write_files(task / "environment", {"setup.sh": setup})
    write_files(task / "tests", tests)
    if solution is not None:
        write_files(task / "solution" / "files", solution)
        write_files(task / "solution", {"solve.sh": "cp -r /solution/files/. /app/\n"})
    (task / "instruction.md").write_text(instruction + "\n")
    (task / "task.toml").write_text(
        'version = "1.0"\n\n[metadata]\ncategory = "bug-fix"\n\n[agent]\ntimeout_sec = 120.0\n'
        + textwrap.dedent(toml)
    )
    return task
