"""SWE-bench's grading rules, through the `swebench` package's own log parsers and report
functions (never re-written here): FAIL_TO_PASS must pass (a skip counts as a fail, xfail as a
pass), PASS_TO_PASS must pass or skip; all of both is resolved (reward 1), anything less is 0.

What the tests printed is not trusted alone. The exit status is the runner's own, taken from
the process, not from the log (code under test can print SWE-bench's exit-status marker too, so
every such line is dropped and the real one appended), and `get_logs_eval` refuses a log whose
tests "pass" while the command failed (SWE-bench#620: a patch printing its own PASSED lines)
and one where no test ran.

One rule is added to SWE-bench's, and it only ever lowers a grade: a test the log reports twice
with different outcomes counts as failed. Real pytest output names each test once; code under
test that prints "PASSED <its test>" after the real FAILED line would otherwise win (the parser
keeps the last line), and parametrized ids the parser cuts at a space (`test_f[1 + 2]` and
`test_f[1 + 3]` both read as `test_f[1`) cannot tell which case passed. Gold ids are read
through the same parser, so an id with a space means what the log can say about it.
"""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.task import SWEBenchSpec

_INSTALL = "the SWE-bench grader needs the swebench package: pip install 'opencomposer[bench]'"


@dataclass(frozen=True)
class Grade:
    reward: float
    status: str
    """SWE-bench's RESOLVED_FULL, RESOLVED_PARTIAL or RESOLVED_NO, or INVALID_LOG."""

    report: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


def grade_swebench(spec: SWEBenchSpec, output: str, exit_code: int) -> Grade:
    try:
        from swebench.harness.constants import TEST_EXIT_CODE, TestStatus
        from swebench.harness.grading import (
            get_eval_tests_report,
            get_logs_eval,
            get_resolution_status,
        )
        from swebench.harness.log_parsers import PARSER_REGISTRY
        from swebench.types import TestSpec
    except ImportError as exc:
        raise TrainingError(f"{_INSTALL} ({exc})") from None
    lines = [line for line in output.splitlines() if TEST_EXIT_CODE not in line]
    log = "\n".join([*lines, f"{TEST_EXIT_CODE}: {exit_code}", ""])
    test_spec = TestSpec(
        instance_id=spec.instance_id or "task",
        image="",
        eval_script_list=[],
        repo=spec.repo or "",
        version="",
        FAIL_TO_PASS=spec.fail_to_pass,
        PASS_TO_PASS=spec.pass_to_pass,
        log_parser=spec.log_parser,
    )
    with tempfile.TemporaryDirectory(prefix="opencomposer-grade-") as folder:
        path = Path(folder, "test_output.log")
        path.write_text(log, encoding="utf-8")
        status_map, valid = get_logs_eval(test_spec, str(path))
    if not valid:
        return Grade(
            0.0,
            "INVALID_LOG",
            problem="the test log is not a run of the tests (no markers, no test ran, or tests "
            f"reported passing while the command exited {exit_code})",
        )
    parse = PARSER_REGISTRY[spec.log_parser]
    for test in _contradicted(parse, log, test_spec):
        status_map[test] = TestStatus.FAILED.value
    gold = {
        "FAIL_TO_PASS": [_as_parsed(parse, test, test_spec) for test in spec.fail_to_pass],
        "PASS_TO_PASS": [_as_parsed(parse, test, test_spec) for test in spec.pass_to_pass],
    }
    report = get_eval_tests_report(status_map, gold)
    status = get_resolution_status(report)
    return Grade(1.0 if status == "RESOLVED_FULL" else 0.0, status, report)


_PASSING = {"PASSED", "XFAIL"}


def _contradicted(parse: Any, log: str, test_spec: Any) -> list[str]:
    """Tests whose lines, read one at a time, disagree on whether they passed."""
    outcomes: dict[str, set[bool]] = {}
    for line in log.splitlines():
        for test, status in parse(line, test_spec).items():
            outcomes.setdefault(test, set()).add(status in _PASSING)
    return [test for test, seen in outcomes.items() if len(seen) > 1]


def _as_parsed(parse: Any, test: str, test_spec: Any) -> str:
    """The key the log parser gives `test` (pytest's cuts an id at its first space)."""
    keys = list(parse(f"PASSED {test}", test_spec))
    return keys[0] if len(keys) == 1 else test


def known_log_parser(name: str) -> bool:
    try:
        from swebench.harness.log_parsers import PARSER_REGISTRY
    except ImportError as exc:
        raise TrainingError(f"{_INSTALL} ({exc})") from None
    return name in PARSER_REGISTRY


@dataclass(frozen=True)
class TestOutcomes:
    """What one test log says of each test, read as the grader reads it."""

    status: dict[str, str]
    """Test id (as the parser keys it) to SWE-bench's PASSED, FAILED, SKIPPED, ERROR, XFAIL."""

    ambiguous: frozenset[str]
    """Ids the log names more than once (parametrized ids the parser cuts at a space, or
    contradicting lines): a grade over them could not say which case it read."""


def test_outcomes(output: str, log_parser: str = "parse_log_pytest") -> TestOutcomes:
    """The statuses a test run's output gives, by the same parser the grader uses: what a task
    generator records as FAIL_TO_PASS and PASS_TO_PASS is what grading will read back."""
    try:
        from swebench.harness.log_parsers import PARSER_REGISTRY
        from swebench.types import TestSpec
    except ImportError as exc:
        raise TrainingError(f"{_INSTALL} ({exc})") from None
    parse = PARSER_REGISTRY[log_parser]
    test_spec = TestSpec("task", "", [], "", "", [], [], log_parser=log_parser)
    seen: dict[str, int] = {}
    for line in output.splitlines():
        for test in parse(line, test_spec):
            seen[test] = seen.get(test, 0) + 1
    ambiguous = {test for test, count in seen.items() if count > 1}
    return TestOutcomes(parse(output, test_spec), frozenset(ambiguous))
