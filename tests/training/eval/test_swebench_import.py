"""SWE-bench jsonl import: an instance of a local git repository becomes a task whose oracle
(the gold patch) passes and whose untouched base commit fails, graded by SWE-bench's parser;
malformed lines and missing clones are named, not fatal to the rest."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.bench_fixtures import bench, run_bench

from opencomposer.training.eval.report import oracle_checks
from opencomposer.training.eval.smith.swebench_import import import_instance, read_instances
from opencomposer.training.eval.task import load_task

_GIT = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}
BUGGY = "def mean(values):\n    return sum(values) / (len(values) + 1)\n"
FIXED = (
    "def mean(values):\n    if not values:\n        raise ValueError('no values')\n"
    "    return sum(values) / len(values)\n"
)
OLD_TESTS = "from calc.stats import mean\n\n\ndef test_one_value():\n    assert mean([0]) == 0\n"
NEW_TESTS = OLD_TESTS + (
    "\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n"
    "\n\ndef test_empty():\n    import pytest\n\n"
    "    with pytest.raises(ValueError):\n        mean([])\n"
)


def _git(repo: Path, *argv: str) -> str:
    done = subprocess.run(
        ["git", *argv], cwd=repo, env=_GIT, capture_output=True, text=True, check=True
    )
    return done.stdout


def _write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)


@pytest.fixture
def instance_file(outside: Path) -> Path:
    """A clone at repos/ex__calc whose base commit has the bug; the fix and the new tests are
    the instance's patch and test_patch, as SWE-bench makes them from a merged PR."""
    repo = outside / "repos" / "ex__calc"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _write(repo, {"calc/__init__.py": "", "calc/stats.py": BUGGY, "tests/test_stats.py": OLD_TESTS})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    _write(repo, {"calc/stats.py": FIXED})
    patch = _git(repo, "diff")
    _git(repo, "checkout", "-q", ".")
    _write(repo, {"tests/test_stats.py": NEW_TESTS})
    test_patch = _git(repo, "diff")
    _git(repo, "commit", "-qam", "fix, with the answer in the history")
    instance = {
        "instance_id": "ex__calc-1",
        "repo": "ex/calc",
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": "mean() is wrong: mean([1, 2, 3]) gives 1.5; mean([]) should raise.",
        "FAIL_TO_PASS": json.dumps(
            ["tests/test_stats.py::test_mean", "tests/test_stats.py::test_empty"]
        ),
        "PASS_TO_PASS": json.dumps(["tests/test_stats.py::test_one_value"]),
        "version": "1.0",
    }
    path = outside / "instances.jsonl"
    path.write_text(json.dumps(instance) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
async def test_an_imported_instance_is_valid_by_its_oracle(outside: Path, instance_file: Path):
    (instance,), problems = read_instances(instance_file)
    assert problems == []
    folder = import_instance(instance, outside / "repos", outside / "tasks")
    task = load_task(folder)
    assert task.warnings == [] and task.swebench is not None
    assert task.swebench.fail_to_pass == [
        "tests/test_stats.py::test_mean",
        "tests/test_stats.py::test_empty",
    ]
    assert task.instruction.startswith("mean() is wrong")
    app_dir = folder / "environment" / "app"
    assert (app_dir / "calc" / "stats.py").read_text() == BUGGY  # the base commit, not HEAD
    assert not (app_dir / ".git").exists()
    assert "tests/test_stats.py" in task.config.verifier.protected_paths
    run = await run_bench(outside, [folder], mode="oracle")
    (check,) = oracle_checks(run.results)
    assert check.valid, check.problem


def test_bad_lines_and_a_missing_clone_are_named_and_the_rest_imported(
    outside: Path, instance_file: Path
):
    good = json.loads(instance_file.read_text())
    elsewhere = {**good, "instance_id": "other__repo-2", "repo": "other/repo"}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({**good, "instance_id": "no-tests", "FAIL_TO_PASS": "[]"}),
        json.dumps({**good, "instance_id": "bad-commit", "base_commit": "HEAD; rm -rf /"}),
        json.dumps(elsewhere),
        json.dumps({**good, "instance_id": 7}),
        json.dumps({**good, "instance_id": "gone-commit", "base_commit": "deadbeef" * 5}),
        json.dumps({**good, "instance_id": "no-diff", "test_patch": "add a test, somehow"}),
        "[1, 2]",
    ]
    instance_file.write_text("\n".join(lines) + "\n")
    result = bench(
        "import",
        str(instance_file),
        "--repos",
        str(outside / "repos"),
        "--out",
        str(outside / "tasks"),
        rc=1,
    )
    output = result.stdout + result.stderr
    assert "line 2" in output and "not JSON" in output
    assert "no-tests" in output and "FAIL_TO_PASS" in output
    assert "bad-commit" in output and "base_commit" in output
    assert "no clone of other/repo" in output
    assert "line 6 (7): instance_id" in output and "line 9 (?)" in output
    # Instances that fail (a commit the clone lacks, a test patch that is no diff) leave nothing.
    assert "gone-commit" in output and "git archive" in output
    assert "no-diff" in output and "names no file" in output
    assert sorted(p.name for p in (outside / "tasks").iterdir()) == ["ex__calc-1"]
    assert "1 tasks in" in output
    assert (outside / "tasks" / "ex__calc-1" / "task.toml").is_file()
