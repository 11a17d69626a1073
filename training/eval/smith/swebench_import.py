"""SWE-bench instances (its jsonl: repo, base_commit, patch, test_patch, FAIL_TO_PASS,
PASS_TO_PASS, problem_statement) as bench tasks, for a user who has the repositories cloned.

The starting repository is `git archive` of the base commit (files only: no history to mine
for the fix); the verifier applies the instance's test patch over it and runs the tests it
touches, graded by SWE-bench's own parser for the repository; the oracle applies the gold
patch. The repository's dependencies are the user's to have installed where the tests run (an
instance's own `test_cmd`, as SWE-bench-style datasets carry, replaces the default command).
"""

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.smith.writer import (
    PLANTED_PATHS,
    task_toml,
    test_script,
    write_script,
)

_DIFF_PATH = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_SOLVE = """#!/bin/bash
# The oracle: the instance's gold patch.
set -euo pipefail
cd /app
git apply --whitespace=nowarn /solution/fix.patch
"""
_DOCKERFILE = """FROM python:3.11
RUN pip install --no-cache-dir pytest
COPY app/ /app/
WORKDIR /app
"""


class Instance(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    instance_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$")
    base_commit: str = Field(pattern=r"^[0-9a-fA-F]{7,40}$")
    patch: str = Field(min_length=1)
    test_patch: str = Field(min_length=1)
    problem_statement: str = Field(min_length=1)
    fail_to_pass: list[str] = Field(alias="FAIL_TO_PASS", min_length=1)
    pass_to_pass: list[str] = Field(default_factory=list, alias="PASS_TO_PASS")
    test_cmd: str | None = None
    log_parser: str | None = None

    @field_validator("fail_to_pass", "pass_to_pass", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        """SWE-bench's own files keep the lists as JSON text."""
        return json.loads(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class ImportProblem:
    line: int
    instance_id: str | None
    problem: str


def read_instances(path: Path) -> tuple[list[Instance], list[ImportProblem]]:
    """Every instance of a jsonl file, and what is wrong with each line that is not one."""
    instances, problems = [], []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainingError(f"cannot read {path}: {exc}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            instances.append(Instance.model_validate(data))
        except json.JSONDecodeError as exc:
            problems.append(ImportProblem(number, None, f"not JSON: {exc}"))
        except ValidationError as exc:
            where = data.get("instance_id") if isinstance(data, dict) else None
            where = None if where is None else str(where)
            fields = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(line)'}: {e['msg']}" for e in exc.errors()
            )
            problems.append(ImportProblem(number, where, fields))
    return instances, problems


def find_clone(repos: Path, repo: str) -> Path:
    owner, name = repo.split("/")
    candidates = [repos / f"{owner}__{name}", repos / owner / name, repos / name]
    for folder in candidates:
        if (folder / ".git").exists() or (folder / "HEAD").is_file():
            return folder
    tried = ", ".join(str(c) for c in candidates)
    raise TrainingError(f"no clone of {repo} (looked for {tried})")


def import_instance(instance: Instance, repos: Path, out: Path) -> Path:
    """The task folder `out/instance_id`, made from the user's clone of the instance's repo.
    It is built aside and moved into place whole: an instance that fails halfway leaves
    nothing behind, and a task imported before stays as it was."""
    clone = find_clone(repos, instance.repo)
    test_files = _patched_paths(instance.test_patch)
    fixed_files = _patched_paths(instance.patch)
    out.mkdir(parents=True, exist_ok=True)
    root = out / instance.instance_id
    with tempfile.TemporaryDirectory(dir=out, prefix=f".{instance.instance_id}-") as staging:
        built = Path(staging, "task")
        _write_task(instance, clone, test_files, fixed_files, built)
        if root.exists():
            shutil.rmtree(root)
        built.replace(root)
    return root


def _write_task(
    instance: Instance, clone: Path, test_files: list[str], fixed_files: list[str], root: Path
) -> None:
    _archive(clone, instance.base_commit, root / "environment" / "app")
    (root / "environment" / "Dockerfile").write_text(_DOCKERFILE, encoding="utf-8")
    tests = root / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    (tests / "test.patch").write_text(instance.test_patch, encoding="utf-8")
    apply = "cd /app && git apply --whitespace=nowarn /tests/test.patch || exit 1"
    command = instance.test_cmd or (
        "python -m pytest -rA --tb=short -p no:cacheprovider "
        + " ".join(shlex.quote(p) for p in test_files if p.endswith(".py"))
    )
    write_script(tests / "test.sh", test_script(f"{apply}\n{command}"))
    config = {
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "log_parser": instance.log_parser or _repo_parser(instance.repo),
        "FAIL_TO_PASS": instance.fail_to_pass,
        "PASS_TO_PASS": instance.pass_to_pass,
    }
    (tests / "config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    solution = root / "solution"
    solution.mkdir(parents=True, exist_ok=True)
    (solution / "fix.patch").write_text(instance.patch, encoding="utf-8")
    write_script(solution / "solve.sh", _SOLVE)
    (root / "instruction.md").write_text(instance.problem_statement.strip() + "\n", "utf-8")
    protected = [*test_files, *(p for p in PLANTED_PATHS if p not in fixed_files)]
    (root / "task.toml").write_text(_task_toml(instance, protected, fixed_files), "utf-8")


def _archive(clone: Path, commit: str, into: Path) -> None:
    """The files of `commit`, no history: `git archive` unpacked with tarfile's data filter."""
    done = subprocess.run(
        ["git", "-C", str(clone), "archive", "--format=tar", commit],
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
    )
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()
        raise TrainingError(f"git archive {commit} in {clone} failed: {why}")
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(into, filter="data")


def _patched_paths(patch: str) -> list[str]:
    paths = dict.fromkeys(b for _, b in _DIFF_PATH.findall(patch))
    if not paths:
        raise TrainingError("a patch names no file (no 'diff --git a/... b/...' line)")
    return list(paths)


def _repo_parser(repo: str) -> str:
    """SWE-bench's parser for the repository (by name, as tests/config.json records it), or
    its pytest parser for one it does not know."""
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    parser = MAP_REPO_TO_PARSER_PY.get(repo)
    for name, function in PARSER_REGISTRY.items():
        if function is parser:
            return name
    return "parse_log_pytest"


def _task_toml(instance: Instance, protected: list[str], fixed: list[str]) -> str:
    lines = sum(
        1
        for row in instance.patch.splitlines()
        if row[:1] in "+-" and not row.startswith(("+++", "---"))
    )
    return task_toml(
        {
            "metadata": {
                "category": "bug-fix",
                "difficulty": "medium",
                "language": "python",
                "tags": ["swe-bench", instance.repo],
                "instance_id": instance.instance_id,
                "base_commit": instance.base_commit,
                "lines_changed": lines,
                "files_touched": len(fixed),
                "tests_failing": len(instance.fail_to_pass),
            },
            "agent": {"timeout_sec": 1800.0},
            "verifier": {"timeout_sec": 900.0, "protected_paths": protected, "grader": "swebench"},
            "environment": {"cpus": 1, "memory_mb": 4096},
        }
    )
