"""A turn run by the same runtime with its tools in process and behind the RPC boundary (a
real `python -m opencomposer.agent.tools.rpc` child): the same items, outcomes and files."""

import asyncio
import json
from pathlib import Path
from typing import Any

from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.protocol.common import ApprovalMode, ApprovalPolicy
from opencomposer.agent.protocol.items import (
    ApprovalDecision,
    CommandExecutionItem,
    ItemStatus,
    UserMessageItem,
)
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import ThreadSession
from opencomposer.agent.tools.rpc import remote_harness_factory
from opencomposer.config import Settings

from .conftest import CALC, make_repo, text

ASK_WRITES = ApprovalPolicy(writes_workspace=ApprovalMode.ask)
FIXED = CALC.replace("a - b", "a + b")
# Fields that differ between two runs of the same script: ids, times, durations.
_VARYING = {"id", "turn_id", "target_item_id", "started_at", "completed_at", "duration_ms"}


def script() -> ScriptedEngine:
    return ScriptedEngine(
        [
            Reply(
                calls=[call("edit_file", path="calc.py", old_string="a - b", new_string="a + b")]
            ),
            # Outlives its timeout: it goes on as a background job, read to its end next.
            Reply(calls=[call("run_terminal", command="sleep 1 && echo finished", timeout=0.2)]),
            Reply(calls=[call("terminal_output", job_id="job-1", wait=30)]),
            Reply(text="Fixed `add`."),
            Reply(text="Nothing else to do."),
        ]
    )


def make_settings(home: Path) -> Settings:
    return Settings(home=home, models_dir=home / "models", agent={"max_wall_time": 60})


async def approve_everything(session: ThreadSession) -> None:
    """A client that approves every request (and so keeps them waiting for it)."""
    async for event in session.subscribe(answers_approvals=True):
        item = getattr(event, "item", None)
        if event.type == "item.started" and item is not None and item.type == "approval_request":
            session.respond_approval(item.id, ApprovalDecision.approve)


def comparable(value: Any, root: Path) -> Any:
    """The run without what differs between any two runs, and its workspace as `ROOT`."""
    text = json.dumps(value, default=str).replace(str(root), "ROOT")

    def strip(data: Any) -> Any:
        if isinstance(data, dict):
            return {k: strip(v) for k, v in data.items() if k not in _VARYING}
        if isinstance(data, list):
            return [strip(v) for v in data]
        return data

    return strip(json.loads(text))


async def run_scenario(runtime: AgentRuntime, repo: Path) -> dict[str, Any]:
    """Fix a bug (approved), run a background job, ask again (the edit is then recorded as
    kept), undo the first turn; what every step left behind."""
    session = await runtime.start_thread(repo, approval_policy=ASK_WRITES)
    approver = asyncio.create_task(approve_everything(session))
    try:
        first = await session.run_turn(text("make the test pass"))
        after_turn = (repo / "calc.py").read_text()
        second = await session.run_turn(text("anything else?"))
        undone = await session.undo("turn", first.id)
    finally:
        approver.cancel()
    outcomes = [
        (o.kind, o.detail, o.turn_id == first.id) for o in runtime.store.outcomes(session.thread.id)
    ]
    return {
        "turns": [(t.status, t.stop_reason) for t in (first, second)],
        "items": [item.model_dump(mode="json") for item in session.items],
        "files": (after_turn, (repo / "calc.py").read_text()),
        "undone": [change.path for change in undone.restored],
        "outcomes": outcomes,
        "prompt": [m.model_dump(mode="json") for m in runtime.engine.requests[-1].messages],
    }


async def test_a_turn_runs_the_same_with_local_and_remote_tools(tmp_path: Path) -> None:
    runs = {}
    for where in ("local", "remote"):
        repo = make_repo(tmp_path / where / "repo")
        settings = make_settings(tmp_path / where / "home")
        factory = (
            remote_harness_factory(tmp_path / where / "tools", settings.tools)
            if where == "remote"
            else None
        )
        runtime = AgentRuntime(settings, script(), harness_factory=factory)
        try:
            runs[where] = comparable(await run_scenario(runtime, repo), repo)
        finally:
            await runtime.close()
    local, remote = runs["local"], runs["remote"]

    completed = (TurnStatus.completed.value, StopReason.answered.value)
    assert local["turns"] == [list(completed)] * 2
    assert local["files"] == [FIXED, CALC] and local["undone"] == ["calc.py"]
    kinds = [item["type"] for item in local["items"]]
    assert kinds == [
        "user_message",
        "file_change",
        "approval_request",
        "command_execution",
        "tool_call",
        "agent_message",
        "user_message",
        "agent_message",
    ]
    approval = local["items"][2]
    assert (approval["tool"], approval["decision"]) == ("edit_file", "approve")
    background, output = local["items"][3], local["items"][4]
    assert (background["background_id"], background["exit_code"]) == ("job-1", None)
    assert output["output"] == "finished\n\n[exit code 0]"
    first_context, second_context = (
        i["context"] for i in local["items"] if i["type"] == "user_message"
    )
    assert "Git: branch main, 0 changed files" in first_context
    assert "Git: branch main, 1 changed file\n M calc.py" in second_context
    assert local["outcomes"] == [
        ["user_followup", {}, True],
        ["edit_kept", {"path": "calc.py", "when": "followup"}, True],
        ["undo", {"scope": "turn", "restored": ["calc.py"]}, True],
    ]
    assert remote == local


async def test_a_harness_process_dying_mid_call_fails_the_turn_cleanly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    settings = make_settings(tmp_path / "home")
    engine = ScriptedEngine([Reply(calls=[call("run_terminal", command="sleep 30")])])
    runtime = AgentRuntime(
        settings, engine, harness_factory=remote_harness_factory(tmp_path / "tools", settings.tools)
    )
    try:
        session = await runtime.start_thread(repo)
        approver = asyncio.create_task(approve_everything(session))
        turn = await session.start_turn(text("wait a while"))
        async with asyncio.timeout(20):
            while not any(isinstance(i, CommandExecutionItem) for i in session.items):
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # the command is running in the server
            session.harness.process.kill()  # type: ignore[attr-defined]
            ended = await session.wait(turn.id)
        approver.cancel()
        assert (ended.status, ended.stop_reason) == (TurnStatus.failed, StopReason.error)
        assert ended.error is not None and ended.error.kind == "unexpected_environment"
        assert "the harness process exited" in ended.error.message
        command = next(i for i in session.items if isinstance(i, CommandExecutionItem))
        assert command.status == ItemStatus.failed
        assert isinstance(session.items[0], UserMessageItem)
    finally:
        async with asyncio.timeout(20):  # closing does not wait on the dead process
            await runtime.close()
