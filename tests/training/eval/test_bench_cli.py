"""`opencomposer bench list|run|report|compare` as users run them: a real process, an agent
served by an OpenAI-compatible upstream (the fake server), reports with their plots."""

import importlib.util
import json
from pathlib import Path

import pytest
from support.bench_fixtures import bench
from support.fake_openai import Compose, ThreadedFakeOpenAI


@pytest.fixture
def bench_root(outside: Path) -> Path:
    return outside


def test_list_names_each_task_and_what_is_wrong(calc_task: Path, value_task: Path):
    rows = json.loads(bench("list", str(calc_task.parent), "--json").stdout)
    assert {row["task"]: row["category"] for row in rows} == {
        "calc-add": "bug-fix",
        "value-two": "bug-fix",
    }
    (calc_task / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    listed = bench("list", str(calc_task.parent), rc=1)
    assert "calc-add" in listed.stdout and "agent.timeout_sec" in listed.stdout
    assert "no tasks found" in bench("list", str(calc_task.parent), "--only", "nope*", rc=2).stderr


@pytest.mark.usefixtures("bwrap")
def test_agent_runs_report_and_compare(outside: Path, value_task: Path):
    tasks = str(value_task.parent)
    with ThreadedFakeOpenAI() as fake:
        engine = f"openai:{fake.base_url}"
        # First run: the agent writes the wrong value; second: the right one.
        for value, name in (("3", "before"), ("2", "after")):
            fake.enqueue(
                Compose(
                    calls=[
                        (
                            "write_file",
                            {"path": "value.txt", "content": f"{value}\n", "overwrite": True},
                        )
                    ]
                ),
                Compose(text="Done."),
            )
            out = str(outside / name)
            bench("run", tasks, "--engine", engine, "--out", out, "--price", "1,4")
    after = (outside / "after" / "report.md").read_text()
    # Two model calls of 100 prompt and 10 completion tokens: 200 * $1 + 20 * $4 per million.
    (row,) = [line for line in after.splitlines() if line.startswith("| value-two")]
    assert row.startswith("| value-two | bug-fix | 1/1 | 1.00 | 220 | 2.0 | 1.0 | 2 |")
    assert row.endswith(" 0.0003 |")  # (200 x $1 + 20 x $4) / 1e6
    assert (outside / "after" / "pass_by_category.png").stat().st_size > 1000
    assert (outside / "after" / "tokens_vs_pass.png").stat().st_size > 1000
    before = bench("report", str(outside / "before")).stdout
    assert "| value-two | bug-fix | 0/1 | 0.00 |" in before
    compared = bench("compare", str(outside / "before"), str(outside / "after")).stdout
    assert "pass@1: 0.00 against 1.00 (1 flipped)" in compared
    assert "| value-two | 0.00 | 1.00 | fixed |" in compared


@pytest.mark.usefixtures("bwrap")
def test_an_oracle_run_fails_on_an_invalid_task(outside: Path, calc_task: Path, value_task: Path):
    # The oracle of value-two writes the wrong value: the task is invalid, and the run says so.
    (value_task / "solution" / "files" / "value.txt").write_text("1\n")
    proc = bench("run", "--oracle", str(calc_task.parent), "--out", str(outside / "o"), rc=1)
    assert "1 of 2 tasks valid" in proc.stdout
    assert "| value-two | **no** | yes |" in proc.stdout
    assert "tasks/hour" in proc.stdout
    assert "sandbox start (median): bare `bwrap true`" in proc.stdout
    info = json.loads((outside / "o" / "run.json").read_text())
    bare, task = info["sandbox_start"]
    assert bare > 0 and task > 0 and info["wall_seconds"] > 0


@pytest.mark.usefixtures("bwrap")
def test_the_oracle_agent_passes_every_valid_task_through_the_agent_runtime(
    outside: Path, calc_task: Path, value_task: Path
):
    out = outside / "upper"
    bench("run", "--oracle-agent", str(calc_task.parent), "--out", str(out))
    info = json.loads((out / "run.json").read_text())
    assert info["engine"] == "oracle-agent" and info["mode"] == "agent"
    for task in ("calc-add", "value-two"):
        result = json.loads((out / task / "attempt-0" / "result.json").read_text())
        assert result["passed"] is True and result["tool_calls"] >= 1 and result["thread_id"]
    refused = bench("run", "--oracle", "--oracle-agent", str(calc_task), rc=2)
    assert "pick one" in refused.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("bwrap")
def test_trials_run_on_ray_workers(outside: Path, calc_task: Path, value_task: Path):
    """`--ray local`: the trials run in Ray actors, each with its own runtime and engine (here
    the fake upstream, reached over loopback from the worker processes)."""
    if importlib.util.find_spec("ray") is None:  # not imported: Ray changes a process's logging
        pytest.skip("Ray is not installed (pip install 'opencomposer[train]')")
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(
            Compose(
                calls=[("write_file", {"path": "value.txt", "content": "2\n", "overwrite": True})]
            ),
            Compose(text="Done."),
        )
        out = outside / "ray"
        args = ["run", str(value_task), "--engine", f"openai:{fake.base_url}", "--out", str(out)]
        bench(*args, "--ray", "local", "--concurrency", "1")
    result = json.loads((out / "value-two" / "attempt-0" / "result.json").read_text())
    assert result["passed"] is True and result["tool_calls"] == 1 and result["thread_id"]
    oracle = bench(
        "run", "--oracle", str(calc_task.parent), "--ray", "local", "--out", str(outside / "o")
    )
    assert "2 of 2 tasks valid" in oracle.stdout
