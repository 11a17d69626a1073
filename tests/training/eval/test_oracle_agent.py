"""The oracle agent: each task's solution applied through the agent's own tools passes the
task's verifier (the harness allows the upper bound), for solutions that ship files, run
scripts over /app, or both."""

from pathlib import Path

import pytest
from support.bench_fixtures import run_bench
from support.bench_tasks import CALC_TESTS, write_task

from opencomposer.serving.engines.base import ChatMessage, GenerationRequest
from opencomposer.training.eval.oracle_engine import OracleEngine, oracle_steps
from opencomposer.training.eval.task import BUILTIN_TASKS, load_task

MIXED = ["py-rename-api", "py-orders-p95", "sh-ssh-bruteforce", "js-orders-de-q2"]


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
async def test_built_in_solutions_pass_when_the_agent_applies_them(outside: Path):
    folders = [BUILTIN_TASKS / name for name in MIXED]
    tasks = [load_task(folder) for folder in folders]
    run = await run_bench(outside, folders, engine=OracleEngine(tasks))
    assert {r.task: r.passed for r in run.results} == dict.fromkeys(MIXED, True)
    by_task = {r.task: r for r in run.results}
    assert by_task["sh-ssh-bruteforce"].tool_calls == 1  # the script alone, /app made relative
    assert by_task["py-orders-p95"].tool_calls >= 2  # its files, then the script
    assert all(r.prompt_tokens == 0 for r in run.results)  # not a model: no tokens claimed


def test_a_binary_solution_file_is_written_through_the_terminal(outside: Path):
    folder = write_task(
        outside,
        "blob",
        instruction="Add the logo.",
        app={"calc.py": "x = 1\n"},
        tests=CALC_TESTS,
        solution={"calc.py": "x = 2\n"},
    )
    (folder / "solution" / "files" / "assets").mkdir()
    (folder / "solution" / "files" / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\xff\x00")
    steps = oracle_steps(load_task(folder))
    assert [name for name, _ in steps] == ["run_terminal", "write_file"]
    assert "base64 -d > assets/logo.png" in steps[0][1]["command"]
    assert steps[1][1] == {"path": "calc.py", "content": "x = 2\n", "overwrite": True}


async def test_a_request_from_no_known_trial_gets_no_tool_call(outside: Path):
    folder = write_task(
        outside, "t", instruction="x", app={"a": "1"}, tests=CALC_TESTS, solution={"a": "2"}
    )
    engine = OracleEngine([load_task(folder)])
    request = GenerationRequest(
        messages=[
            ChatMessage(role="system", content="- Workspace root (every path ...): /elsewhere/x/y"),
            ChatMessage(role="user", content="x"),
        ]
    )
    events = [event async for event in engine.generate(request)]
    result = events[-1].result
    assert result.tool_calls == [] and "Not a bench trial" in result.text
