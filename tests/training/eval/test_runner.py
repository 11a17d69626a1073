"""Bench runs through the real runtime and tool harness with a playbook engine: one task
solved, one failed, each graded in its own sandbox, the reward in the trace store, the report
right, and an interrupted run resumed without running a finished trial again."""

from pathlib import Path

import pytest
from support.bench_fixtures import run_bench
from support.playbook_engine import PlaybookEngine

from opencomposer.training.eval.report import markdown_report, summarize
from opencomposer.training.eval.results import load_run

pytestmark = pytest.mark.usefixtures("bwrap")


@pytest.fixture
def bench_root(outside: Path) -> Path:
    return outside


FIX_CALC = [
    ("read_file", {"path": "calc.py"}),
    ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
]
WRONG_VALUE = [("write_file", {"path": "value.txt", "content": "3\n", "overwrite": True})]


async def test_one_task_solved_one_failed(outside: Path, calc_task: Path, value_task: Path):
    run = await run_bench(
        outside, [calc_task, value_task], {"calc-add": FIX_CALC, "value-two": WRONG_VALUE}
    )
    by_task = {result.task: result for result in run.results}
    solved, failed = by_task["calc-add"], by_task["value-two"]
    assert (solved.passed, solved.reward, solved.reward_source) == (True, 1.0, "reward.txt")
    assert (failed.passed, failed.reward) == (False, 0.0)
    assert solved.error is None and failed.error is None
    assert solved.tool_calls == 2 and solved.steps == 3  # two calls, then the answer
    assert failed.tool_calls == 1 and failed.steps == 2
    assert (solved.lines_changed, solved.files_changed) == (2, 1)
    assert solved.prompt_tokens == 3 * 120 and solved.completion_tokens == 3 * 30
    assert solved.turn_status == "completed"
    # The reward is recorded with the trace: the bench run is RL data.
    rewards = [o for o in run.outcomes[solved.thread_id] if o["kind"] == "verifier_reward"]
    assert rewards == [
        {
            "kind": "verifier_reward",
            "reward": 1.0,
            "task": "calc-add",
            "category": "bug-fix",
            "run": str(run.run_dir.resolve()),
            "trial": "attempt-0",
            "source": "reward.txt",
            "problem": None,
        }
    ]
    assert [o["reward"] for o in run.outcomes[failed.thread_id] if "reward" in o] == [0.0]

    info, loaded = load_run(run.run_dir)
    assert info.mode == "agent" and len(loaded) == 2
    rows = {row.task: row for row in summarize(loaded)}
    assert rows["calc-add"].pass_at(1) == 1.0 and rows["value-two"].pass_at(1) == 0.0
    report = markdown_report(info, loaded, None)
    assert "| calc-add |" in report and "| value-two |" in report
    assert "| **all** (2) | 0.50 |" in report  # the run's pass@1


async def test_a_resumed_run_keeps_finished_trials(
    outside: Path, calc_task: Path, value_task: Path
):
    plays = {"calc-add": FIX_CALC, "value-two": WRONG_VALUE}
    first = await run_bench(outside, [calc_task, value_task], plays)
    # An interrupted run: one trial's result is gone, as if it was killed before saving.
    (first.run_dir / "value-two" / "attempt-0" / "result.json").unlink()
    again = await run_bench(outside, [calc_task, value_task], plays)
    assert [r.task for r in again.results] == ["calc-add", "value-two"]
    assert "calc-add" not in again.engine.seen  # not run again
    assert "value-two" in again.engine.seen
    assert again.results[0].finished_at == first.results[0].finished_at
    # A task changed since (here its tests accept 3): its trials are not its results any more.
    test_sh = value_task / "tests" / "test.sh"
    test_sh.write_text(test_sh.read_text().replace("= 2 ]", "= 3 ]"))
    third = await run_bench(outside, [calc_task, value_task], plays)
    assert [r.passed for r in third.results] == [True, True]
    assert "calc-add" not in third.engine.seen


async def test_attempts_give_pass_at_k(outside: Path, value_task: Path):
    # Every attempt writes 3: pass@k is 0 at every k, and the run has all attempts.
    run = await run_bench(outside, [value_task], {"value-two": WRONG_VALUE}, attempts=3)
    assert [r.attempt for r in run.results] == [0, 1, 2]
    (row,) = summarize(run.results)
    assert row.attempts == 3 and row.pass_at(3) == 0.0


async def test_an_oracle_run_validates_a_task(outside: Path, calc_task: Path, value_task: Path):
    run = await run_bench(outside, [calc_task, value_task], mode="oracle")
    kinds = {(r.task, r.kind): r.passed for r in run.results}
    assert kinds == {
        ("calc-add", "oracle"): True,
        ("calc-add", "untouched"): False,
        ("value-two", "oracle"): True,
        ("value-two", "untouched"): False,
    }
    assert isinstance(run.engine, PlaybookEngine) and not run.engine.seen


async def test_a_failing_setup_is_the_trials_error_not_the_runs(
    outside: Path, calc_task: Path, value_task: Path
):
    (calc_task / "environment" / "setup.sh").write_text("echo broken >&2\nexit 3\n")
    run = await run_bench(outside, [calc_task, value_task], {"value-two": WRONG_VALUE})
    by_task = {result.task: result for result in run.results}
    assert by_task["calc-add"].error.startswith("environment: ")
    assert "exited with 3" in by_task["calc-add"].error and "broken" in by_task["calc-add"].error
    assert by_task["value-two"].error is None and by_task["value-two"].reward == 0.0


async def test_a_hung_verifier_is_stopped_and_keeps_what_it_printed(
    outside: Path, value_task: Path
):
    (value_task / "tests" / "test.sh").write_text("echo checking value; sleep 600\n")
    toml = value_task / "task.toml"
    toml.write_text(toml.read_text() + "\n[verifier]\ntimeout_sec = 2.0\n")
    run = await run_bench(outside, [value_task], {"value-two": WRONG_VALUE})
    (result,) = run.results
    assert result.reward == 0.0 and result.problem == "the tests ran past 2 s"
    log = run.run_dir / "value-two" / "attempt-0" / "private" / "verifier" / "test-output.log"
    assert log.read_text().startswith("checking value\n")
    assert "[stopped after 2 s]" in log.read_text()
