"""Turns end to end: model steps, tool calls in a real repository, the log and the prompt."""

import asyncio
from pathlib import Path

from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    CommandExecutionItem,
    FileChangeItem,
    FileReadItem,
    ItemStatus,
    ReasoningItem,
    SearchItem,
    ToolCallItem,
    UserMessageItem,
)
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.serving.engines.errors import EngineServerError

from .conftest import text


async def test_multi_step_turn_fixes_a_bug_in_a_real_repository(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine(
        [
            Reply(reasoning="Find add first.", calls=[call("grep", pattern="def add")]),
            Reply(calls=[call("read_file", path="calc.py")]),
            Reply(
                text="The sign is wrong.",
                calls=[
                    call(
                        "edit_file",
                        path="calc.py",
                        old_string="return a - b",
                        new_string="return a + b",
                    )
                ],
            ),
            Reply(calls=[call("run_terminal", command="python -m pytest -q test_calc.py")]),
            Reply(text="Fixed `add` in calc.py; the test passes."),
        ]
    )
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("make the test pass"))

    assert (turn.status, turn.stop_reason, turn.usage.model_calls) == (
        TurnStatus.completed,
        StopReason.answered,
        5,
    )
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    kinds = [(type(item).__name__, item.status) for item in session.items]
    assert kinds == [
        ("UserMessageItem", ItemStatus.completed),
        ("ReasoningItem", ItemStatus.completed),
        ("SearchItem", ItemStatus.completed),
        ("FileReadItem", ItemStatus.completed),
        ("AgentMessageItem", ItemStatus.completed),
        ("FileChangeItem", ItemStatus.completed),
        ("CommandExecutionItem", ItemStatus.completed),
        ("AgentMessageItem", ItemStatus.completed),
    ]
    search, read, change, command = (session.items[i] for i in (2, 3, 5, 6))
    assert isinstance(search, SearchItem) and (search.query, search.match_count) == ("def add", 1)
    assert isinstance(read, FileReadItem) and (read.path, read.total_lines) == ("calc.py", 2)
    assert isinstance(change, FileChangeItem)
    assert [(c.path, c.kind) for c in change.changes] == [("calc.py", "update")]
    assert isinstance(command, CommandExecutionItem) and command.exit_code == 0
    assert "1 passed" in (command.output or "")

    user = session.items[0]
    assert isinstance(user, UserMessageItem) and user.context is not None
    assert "branch main" in user.context

    # The last request holds the whole conversation: each step's assistant message with its
    # calls as written, and each result under its call id.
    last = engine.requests[-1].messages
    assert [m.role for m in last] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert last[2].reasoning == "Find add first." and last[2].tool_calls[0].name == "grep"
    assert last[6].content == "The sign is wrong."
    assert last[3].tool_call_id == last[2].tool_calls[0].id
    assert "return a - b" in (last[5].content or "")
    assert "[exit code 0]" in (last[9].content or "")


async def test_events_stream_every_item_in_order_and_are_stored(make_runtime, repo) -> None:
    runtime = make_runtime([Reply(text="Hello there, how can I help?")])
    session = await runtime.start_thread(repo)
    events = session.subscribe()
    turn = await session.run_turn(text("hi"))
    seen = []
    async with asyncio.timeout(5):
        async for event in events:
            seen.append(event)
            if event.type == "turn.completed":
                break
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    types = [e.type for e in seen]
    assert types[:5] == [
        "thread.started",
        "turn.started",
        "item.started",
        "item.completed",
        "item.started",
    ]
    assert types[-2:] == ["item.completed", "turn.completed"]
    deltas = "".join(e.delta.text for e in seen if e.type == "item.delta")
    assert deltas == "Hello there, how can I help?"
    assert runtime.store.events(session.thread.id) == seen
    thread, turns = runtime.read_thread(session.thread.id)
    assert thread.title == "hi"
    assert [t.id for t in turns] == [turn.id]
    assert [type(i) for i in turns[0].items] == [UserMessageItem, AgentMessageItem]


async def test_parallel_read_only_calls_run_together(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine(
        [
            Reply(
                calls=[
                    call("run_terminal", command="sleep 0.6; echo one"),
                    call("run_terminal", command="sleep 0.6; echo two"),
                    call("read_file", path="calc.py"),
                ]
            ),
            Reply(text="done"),
        ]
    )
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    await session.run_turn(text("go"))
    commands = [i for i in session.items if isinstance(i, CommandExecutionItem)]
    assert [c.status for c in commands] == [ItemStatus.completed, ItemStatus.completed]
    # `sleep` and `echo` only read, so the two commands overlapped.
    first, second = commands
    assert second.started_at < first.completed_at
    assert first.completed_at is not None and second.completed_at is not None
    overlap = min(first.completed_at, second.completed_at) - max(
        first.started_at, second.started_at
    )
    assert overlap.total_seconds() > 0.3


async def test_malformed_calls_become_errors_the_model_reads(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine(
        [
            Reply(
                calls=[
                    ("no_such_tool", {}),
                    ("read_file", '{"path": "calc.py"'),
                    ("read_file", {"path": 3}),
                    ("read_file", "[1, 2]"),
                ]
            ),
            Reply(text="Sorry, retrying properly."),
        ]
    )
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("read calc.py"))
    assert turn.status == TurnStatus.completed
    calls = [i for i in session.items if isinstance(i, ToolCallItem)]
    assert [c.status for c in calls] == [ItemStatus.failed] * 4
    assert [c.error.kind for c in calls if c.error] == ["not_found"] + ["invalid_arguments"] * 3
    assert calls[1].arguments_text == '{"path": "calc.py"' and calls[1].arguments == {}
    results = [m for m in engine.requests[1].messages if m.role == "tool"]
    assert "no tool named 'no_such_tool'" in (results[0].content or "")
    assert "not valid JSON" in (results[1].content or "")
    # The broken call is replayed exactly as the model wrote it.
    assistant = engine.requests[1].messages[2]
    assert assistant.tool_calls[1].arguments == '{"path": "calc.py"'


async def test_engine_failure_fails_the_turn_with_an_error_item(make_runtime, repo) -> None:
    failure = EngineServerError("upstream exploded")
    runtime = make_runtime([Reply(error=failure)] * 3)
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("hi"))
    assert (turn.status, turn.stop_reason) == (TurnStatus.failed, StopReason.error)
    assert turn.error is not None and turn.error.kind == "engine_server_error"
    errors = [i for i in session.items if i.type == "error"]
    # Two retries were announced, then the failure itself.
    assert len(errors) == 3 and errors[-1].error.message == "upstream exploded"


async def test_transient_failure_mid_stream_is_retried(make_runtime, repo: Path) -> None:
    failure = EngineServerError("connection reset")
    runtime = make_runtime(
        [
            Reply(text="partial answer that breaks", error=failure, fail_after=3),
            Reply(text="whole answer"),
        ]
    )
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("hi"))
    assert turn.status == TurnStatus.completed
    messages = [i for i in session.items if isinstance(i, AgentMessageItem)]
    assert [(m.status, m.text) for m in messages] == [
        (ItemStatus.failed, "partial answer that breaks"[:12]),
        (ItemStatus.completed, "whole answer"),
    ]


async def test_budgets_end_the_turn_and_say_why(make_runtime, repo: Path) -> None:
    loop_forever = [Reply(calls=[call("glob", pattern="*.py")])] * 5
    runtime = make_runtime(loop_forever, max_steps=3)
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("go"))
    assert (turn.status, turn.stop_reason, turn.usage.model_calls) == (
        TurnStatus.completed,
        StopReason.max_steps,
        3,
    )

    runtime = make_runtime(
        [Reply(calls=[call("glob", pattern="*.py")], usage=(600, 50))] * 5, max_turn_tokens=1000
    )
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("go"))
    assert (turn.stop_reason, turn.usage.model_calls) == (StopReason.max_tokens, 2)


async def test_wall_time_budget_interrupts_a_long_command(make_runtime, repo: Path) -> None:
    runtime = make_runtime(
        [Reply(calls=[call("run_terminal", command="sleep 30", timeout=60)])], max_wall_time=1.0
    )
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("wait"))
    assert (turn.status, turn.stop_reason) == (TurnStatus.completed, StopReason.max_wall_time)
    command = next(i for i in session.items if isinstance(i, CommandExecutionItem))
    assert command.status == ItemStatus.interrupted


async def test_reasoning_and_text_stream_as_separate_items(make_runtime, repo: Path) -> None:
    runtime = make_runtime([Reply(reasoning="thinking hard", text="answer")])
    session = await runtime.start_thread(repo)
    await session.run_turn(text("q"))
    reasoning, answer = session.items[1:]
    assert isinstance(reasoning, ReasoningItem) and reasoning.text == "thinking hard"
    assert isinstance(answer, AgentMessageItem) and answer.text == "answer"
    assert reasoning.step == answer.step == 1
