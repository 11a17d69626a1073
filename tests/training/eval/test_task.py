"""Loading a task checks it whole and names every problem, in the task's own terms."""

import json
from pathlib import Path

import pytest

from opencomposer.training.eval.task import TaskError, discover_tasks, load_task


def problems(task: Path) -> list[str]:
    with pytest.raises(TaskError) as caught:
        load_task(task)
    return caught.value.problems


def test_a_complete_task_loads_with_harbors_meaning(calc_task: Path):
    (calc_task / "task.toml").write_text(
        'version = "1.0"\n[metadata]\ncategory = "bug-fix"\ndifficulty = "hard"\n'
        'author_name = "someone"\n[agent]\ntimeout_sec = 90\n[verifier]\ntimeout_sec = 30\n'
        "[environment]\ncpus = 2\nmemory_mb = 512\nallow_internet = false\ngpus = 0\n"
    )
    task = load_task(calc_task)
    assert (task.name, task.category) == ("calc-add", "bug-fix")
    assert task.config.agent.timeout_sec == 90 and task.config.environment.memory_mb == 512
    assert task.instruction == "add() is wrong; please fix calc-add."
    # Free-form metadata is Harbor's; a key neither Harbor nor the bench reads is named.
    assert task.warnings == ["task.toml: unknown key environment.gpus (ignored)"]


def test_every_missing_part_is_named_at_once(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    found = problems(empty)
    assert any("instruction.md is missing" in p for p in found)
    assert any("task.toml is missing" in p for p in found)
    assert any("tests/test.sh is missing" in p for p in found)
    assert any("environment/ is missing" in p for p in found)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("version = [", "not valid TOML"),
        ("[agent]\ntimeout_sec = -5\n", "agent.timeout_sec"),
        ('[metadata]\ndifficulty = "impossible"\n', "metadata.difficulty"),
        ('[verifier]\ngrader = "vibes"\n', "verifier.grader"),
        ("[environment]\nmemory_mb = 1\n", "environment.memory_mb"),
    ],
)
def test_a_malformed_task_toml_says_where(calc_task: Path, toml: str, expected: str):
    (calc_task / "task.toml").write_text(toml)
    assert any(expected in p for p in problems(calc_task))


@pytest.mark.parametrize(
    "content", [b"", b"   \n", b"\xff\xfe not utf-8"], ids=["empty", "blank", "binary"]
)
def test_an_unreadable_instruction_is_a_problem(calc_task: Path, content: bytes):
    (calc_task / "instruction.md").write_bytes(content)
    assert any("instruction.md" in p for p in problems(calc_task))


def test_a_swebench_graded_task_needs_its_test_lists(calc_task: Path):
    toml = calc_task / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]\n", '[verifier]\ngrader = "swebench"\n'))
    assert any("tests/config.json" in p for p in problems(calc_task))
    config = calc_task / "tests" / "config.json"
    config.write_text("{not json")
    assert any("not valid JSON" in p for p in problems(calc_task))
    config.write_text(json.dumps({"FAIL_TO_PASS": [], "PASS_TO_PASS": ["t::a"]}))
    assert any("FAIL_TO_PASS" in p for p in problems(calc_task))
    config.write_text(json.dumps({"FAIL_TO_PASS": ["test_calc.py::test_add"]}))
    assert load_task(calc_task).swebench.fail_to_pass == ["test_calc.py::test_add"]


def test_a_task_without_an_oracle_loads_with_a_warning(calc_task: Path):
    (calc_task / "solution" / "solve.sh").unlink()
    task = load_task(calc_task)
    assert not task.has_solution
    assert any("cannot be oracle-checked" in w for w in task.warnings)


def test_discovery_finds_each_task_once(calc_task: Path, value_task: Path):
    root = calc_task.parent
    assert discover_tasks([root, calc_task]) == sorted([calc_task.resolve(), value_task.resolve()])
