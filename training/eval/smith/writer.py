"""A generated task written out in the bench's (Harbor's) format, graded by SWE-bench's rules:
environment/app is the broken repository, tests/config.json its FAIL_TO_PASS and PASS_TO_PASS,
solution/ the files as they were (the oracle is the reverse of the bug)."""

import difflib
import json
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opencomposer.training.eval.sandbox_scripts.restore_protected import matches

_DOCKERFILE = """FROM python:3.11-slim
RUN pip install --no-cache-dir pytest==8.*
COPY app/ /app/
WORKDIR /app
"""
_SOLVE = """#!/bin/bash
# The oracle: the files as they were before the bug.
set -euo pipefail
cp -r /solution/files/. /app/
"""
_TEST_SH = """#!/bin/bash
# The project's own tests (the protected files put back first), between SWE-bench's markers;
# its parser grades the log against tests/config.json.
echo '{start}'
{command}
status=$?
echo '{end}'
exit "$status"
"""
PLANTED_PATHS = (
    "**/conftest.py",
    "**/pytest.ini",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    "setup.cfg",
    "tox.ini",
    "pyproject.toml",
)
"""What could change how pytest runs or what Python imports first: restored as it started, or
removed when the agent planted it."""


@dataclass
class GeneratedTask:
    name: str
    instruction: str
    tree: Path
    """The unbroken repository."""

    broken: dict[str, str]
    """Relative path to its broken text."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    test_command: str
    protected: list[str]
    verifier_timeout: float
    difficulty: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def stats(self) -> dict[str, int]:
        """The oracle's diff (lines added plus removed, files) and the tests it turns green."""
        lines = 0
        for relative, text in self.broken.items():
            before = (self.tree / relative).read_text(encoding="utf-8").splitlines()
            diff = difflib.unified_diff(text.splitlines(), before, lineterm="", n=0)
            lines += sum(1 for row in diff if row[:1] in "+-" and row[:3] not in ("+++", "---"))
        return {
            "lines_changed": lines,
            "files_touched": len(self.broken),
            "tests_failing": len(self.fail_to_pass),
        }


def write_task(task: GeneratedTask, out: Path, *, repo: str, instance_id: str) -> Path:
    """The task folder `out/task.name` (replaced when present)."""
    root = out / task.name
    if root.exists():
        shutil.rmtree(root)
    environment = root / "environment"
    shutil.copytree(task.tree, environment / "app", symlinks=True)
    for relative, text in task.broken.items():
        (environment / "app" / relative).write_text(text, encoding="utf-8")
    (environment / "Dockerfile").write_text(_DOCKERFILE, encoding="utf-8")
    solution = root / "solution"
    for relative in task.broken:
        target = solution / "files" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(task.tree / relative, target)
    write_script(solution / "solve.sh", _SOLVE)
    tests = root / "tests"
    tests.mkdir()
    _ship_pristine(task, tests)
    command = _restore_command(task.protected) + task.test_command
    write_script(tests / "test.sh", test_script(command))
    config = {
        "instance_id": instance_id,
        "repo": repo,
        "log_parser": "parse_log_pytest",
        "FAIL_TO_PASS": task.fail_to_pass,
        "PASS_TO_PASS": task.pass_to_pass,
    }
    (tests / "config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    (root / "instruction.md").write_text(task.instruction, encoding="utf-8")
    (root / "task.toml").write_text(_task_toml(task), encoding="utf-8")
    return root


def _ship_pristine(task: GeneratedTask, tests: Path) -> None:
    """The protected files as they were, at tests/pristine, and their list: what test.sh puts
    back itself, so the task stays honest where the runner does not honour protected_paths
    (Harbor)."""
    kept = []
    (tests / "pristine").mkdir()
    for path in sorted(task.tree.rglob("*")):
        relative = path.relative_to(task.tree).as_posix()
        if path.is_file() and not path.is_symlink() and matches(relative, task.protected):
            target = tests / "pristine" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            kept.append(relative)
    (tests / "pristine.list").write_text("".join(f"{r}\n" for r in kept), encoding="utf-8")


def _restore_command(patterns: list[str]) -> str:
    """Shell that copies tests/pristine over /app and removes every other file a protected
    pattern matches (one the agent planted: a test module patching the library at import)."""
    tests = " -o ".join(
        f"-name {shlex.quote(p[3:])}"
        if p.startswith("**/")
        else f"-path {shlex.quote('/app/' + p)}"
        for p in patterns
    )
    return (
        "cp -r /tests/pristine/. /app/\n"
        f"find /app -path /app/.git -prune -o -type f \\( {tests} \\) -printf '%P\\n' \\\n"
        "  | grep -vxF -f /tests/pristine.list"
        ' | while IFS= read -r planted; do rm -f -- "/app/$planted"; done\n'
    )


def test_script(command: str) -> str:
    """test.sh for a task graded by SWE-bench's rules: `command`'s output between the markers
    its log reader looks for, and `command`'s exit status."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT

    return _TEST_SH.format(start=START_TEST_OUTPUT, end=END_TEST_OUTPUT, command=command)


def _task_toml(task: GeneratedTask) -> str:
    metadata = {
        "category": "bug-fix",
        "difficulty": task.difficulty,
        "language": "python",
        **task.metadata,
        **task.stats(),
    }
    sections = {
        "metadata": metadata,
        "agent": {"timeout_sec": 900.0},
        "verifier": {
            "timeout_sec": task.verifier_timeout,
            "protected_paths": task.protected,
            "grader": "swebench",
        },
        "environment": {"cpus": 1, "memory_mb": 2048},
    }
    return task_toml(sections)


def task_toml(sections: dict[str, dict[str, Any]]) -> str:
    """A task.toml of these sections (tables of scalars and string lists)."""
    text = 'version = "1.0"\n' + "".join(
        f"\n[{name}]\n" + "".join(f"{key} = {_toml(value)}\n" for key, value in body.items())
        for name, body in sections.items()
    )
    tomllib.loads(text)  # what we wrote must read back
    return text


def _toml(value: Any) -> str:
    """TOML for the scalars and string lists a task.toml holds (JSON's strings are TOML's
    basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(_toml(item) for item in value) + "]"


def write_script(path: Path, text: str) -> None:
    """An executable script, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
