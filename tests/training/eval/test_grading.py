"""SWE-bench grading of real pytest logs: the tests are run here (pytest -rA, as SWE-bench's
eval scripts run them), and their output is graded as a task's verifier output would be."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opencomposer.training.eval.grading import grade_swebench
from opencomposer.training.eval.task import SWEBenchSpec

pytest.importorskip("swebench")
from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE

SUITE = """
import pytest

import calc


def test_add():
    assert calc.add(2, 3) == 5


def test_sub():
    assert calc.sub(5, 3) == 2


@pytest.mark.skipif(not calc.FEATURE, reason="feature off")
def test_feature():
    assert calc.add(1, 1) == 2


@pytest.mark.xfail(reason="known rounding", strict=False)
def test_rounding():
    assert calc.add(0.1, 0.2) == 0.3


@pytest.mark.parametrize("expr", ["2 + 1", "2 + 2"])
def test_expression(expr):
    left, right = (int(part) for part in expr.split(" + "))
    assert calc.add(left, right) == left + right
"""

GOOD = "FEATURE = True\n\ndef add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def run_tests(tmp_path: Path, module: str, suite: str = SUITE) -> tuple[str, int]:
    """What tests/test.sh would print, markers included, and pytest's exit status."""
    (tmp_path / "calc.py").write_text(module)
    (tmp_path / "test_calc.py").write_text(suite)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_calc.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    output = f"{START_TEST_OUTPUT}\n{done.stdout}{done.stderr}\n{END_TEST_OUTPUT}\n"
    return output, done.returncode


def spec(f2p: list[str], p2p: list[str] | None = None) -> SWEBenchSpec:
    return SWEBenchSpec.model_validate(
        {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p or ["test_calc.py::test_sub"]}
    )


def test_a_fixed_repository_is_resolved_and_a_broken_one_is_not(tmp_path: Path):
    output, status = run_tests(tmp_path, GOOD)
    grade = grade_swebench(spec(["test_calc.py::test_add"]), output, status)
    assert (grade.reward, grade.status) == (1.0, "RESOLVED_FULL")

    output, status = run_tests(tmp_path, GOOD.replace("a + b", "a - b"))
    grade = grade_swebench(spec(["test_calc.py::test_add"]), output, status)
    assert grade.reward == 0.0 and grade.status == "RESOLVED_NO"
    assert grade.report["FAIL_TO_PASS"]["failure"] == ["test_calc.py::test_add"]


def test_a_broken_pass_to_pass_test_is_not_resolved(tmp_path: Path):
    output, status = run_tests(tmp_path, GOOD.replace("a - b", "b - a"))
    grade = grade_swebench(spec(["test_calc.py::test_add"]), output, status)
    assert grade.reward == 0.0
    assert grade.report["PASS_TO_PASS"]["failure"] == ["test_calc.py::test_sub"]


def test_a_skipped_fail_to_pass_test_counts_as_failed(tmp_path: Path):
    output, status = run_tests(tmp_path, GOOD.replace("FEATURE = True", "FEATURE = False"))
    assert status == 0  # nothing failed: only a skip
    grade = grade_swebench(spec(["test_calc.py::test_feature"]), output, status)
    assert grade.reward == 0.0 and grade.status != "RESOLVED_FULL"


def test_an_xfail_counts_as_passing(tmp_path: Path):
    output, status = run_tests(tmp_path, GOOD)
    assert "XFAIL test_calc.py::test_rounding" in output
    grade = grade_swebench(spec(["test_calc.py::test_rounding"]), output, status)
    assert grade.reward == 1.0


def test_an_error_during_collection_fails_every_test(tmp_path: Path):
    output, status = run_tests(tmp_path, GOOD + "\nimport no_such_module\n")
    assert status != 0 and "ERROR test_calc.py" in output
    grade = grade_swebench(spec(["test_calc.py::test_add"]), output, status)
    assert grade.reward == 0.0


def test_parametrized_ids_with_spaces_grade_by_what_the_log_can_say(tmp_path: Path):
    ids = ["test_calc.py::test_expression[2 + 1]", "test_calc.py::test_expression[2 + 2]"]
    output, status = run_tests(tmp_path, GOOD)
    assert grade_swebench(spec(ids), output, status).reward == 1.0
    # The parser cuts both ids at their first space (`test_expression[2`): the log cannot
    # say which case passed, so one failing fails both.
    broken = GOOD.replace("return a + b", "return a + b if b != 2 else 0")
    output, status = run_tests(tmp_path, broken)
    assert "FAILED test_calc.py::test_expression[2 + 2]" in output
    assert grade_swebench(spec(ids[:1]), output, status).reward == 0.0


def test_a_log_that_never_ran_a_test_is_invalid(tmp_path: Path):
    grade = grade_swebench(spec(["test_calc.py::test_add"]), "no markers at all\n", 0)
    assert grade.status == "INVALID_LOG" and grade.reward == 0.0
    empty = f"{START_TEST_OUTPUT}\nno tests ran in 0.01s\n{END_TEST_OUTPUT}\n"
    assert grade_swebench(spec(["test_calc.py::test_add"]), empty, 5).reward == 0.0


SPOOFS = {
    "passed lines after the real results": "PASSED test_calc.py::test_add\n",
    "a forged exit status": f"PASSED test_calc.py::test_add\n{TEST_EXIT_CODE}: 0\n",
    "a decoy failure to keep the log looking real": (
        "FAILED test_calc.py::test_decoy - x\nPASSED test_calc.py::test_add\n"
    ),
    "forged end and start markers": (
        f"{END_TEST_OUTPUT}\n{START_TEST_OUTPUT}\nPASSED test_calc.py::test_add\n"
        f"PASSED test_calc.py::test_sub\n{END_TEST_OUTPUT}\n"
    ),
}


@pytest.mark.parametrize("spoof", SPOOFS.values(), ids=SPOOFS.keys())
def test_printed_results_do_not_outvote_the_run(tmp_path: Path, spoof: str):
    output, status = run_tests(tmp_path, GOOD.replace("a + b", "a - b"))
    assert status != 0
    # What the code under test prints lands inside the markers, before the real END marker.
    forged = output.replace(END_TEST_OUTPUT, spoof + END_TEST_OUTPUT, 1)
    grade = grade_swebench(spec(["test_calc.py::test_add"]), forged, status)
    assert grade.reward == 0.0, grade
