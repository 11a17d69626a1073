"""Per-thread and per-turn settings, as a trainer sets them per environment: limits that only
tighten the server's, and a thread's tool set; both survive a resumed thread."""

from pathlib import Path

import pytest
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.items import TextInput, ToolCallItem
from opencomposer.agent.protocol.methods import ThreadStartParams, TurnStartParams
from opencomposer.agent.protocol.threads import StopReason, TurnLimits
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import SessionError

GLOB = call("glob", pattern="*.py")


def ask(words: str) -> list[TextInput]:
    return [TextInput(text=words)]


async def test_thread_limits_tighten_the_server_and_never_loosen_it(
    make_runtime, repo: Path
) -> None:
    runtime = make_runtime([Reply(calls=[GLOB])] * 10, max_steps=3)
    tight = await runtime.start_thread(repo, limits=TurnLimits(max_steps=1))
    turn = await tight.run_turn(ask("look"))
    assert (turn.stop_reason, turn.usage.model_calls) == (StopReason.max_steps, 1)

    loose = await runtime.start_thread(repo, limits=TurnLimits(max_steps=50))
    turn = await loose.run_turn(ask("look"))
    assert (turn.stop_reason, turn.usage.model_calls) == (StopReason.max_steps, 3)


async def test_a_turn_may_tighten_its_thread_for_itself_only(make_runtime, repo: Path) -> None:
    # Two steps for the first turn, then three tool steps and an answer for the second.
    runtime = make_runtime([Reply(calls=[GLOB])] * 5 + [Reply(text="done")], max_steps=10)
    api = AgentAPI(runtime, lambda: [repo])
    started = await api.thread_start(
        ThreadStartParams(workspace=str(repo), limits=TurnLimits(max_steps=4))
    )
    thread_id = started.thread.id
    params = TurnStartParams(
        thread_id=thread_id, input=ask("quick"), limits=TurnLimits(max_steps=2, max_tokens=10**6)
    )
    async with await api.stream_turn(params) as stream:
        [_ async for _ in stream]
    assert stream.ended is not None
    assert (stream.ended.stop_reason, stream.ended.usage.model_calls) == (StopReason.max_steps, 2)
    session = await api.session(thread_id)
    # The next turn has the thread's own limits again.
    turn = await session.run_turn(ask("thorough"))
    assert (turn.stop_reason, turn.usage.model_calls) == (StopReason.answered, 4)
    assert session.thread.limits == TurnLimits(max_steps=4)


async def test_a_thread_sees_and_calls_only_its_tools(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine(
        [Reply(calls=[call("run_terminal", command="echo hi"), GLOB]), Reply(text="ok")]
    )
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo, tools=["glob", "read_file"])
    assert session.thread.tools == ["glob", "read_file"]
    await session.run_turn(ask("look"))
    offered = sorted(spec.name for spec in engine.requests[0].tools)
    assert offered == ["glob", "read_file"]
    refused, ran = [i for i in session.items if i.type in ("tool_call", "search")]
    assert isinstance(refused, ToolCallItem) and refused.error is not None
    assert refused.error.kind == "not_found" and "run_terminal" in refused.error.message
    assert ran.status == "completed"


async def test_an_unknown_tool_is_refused_before_the_thread_exists(
    make_runtime, repo: Path
) -> None:
    runtime = make_runtime([])
    with pytest.raises(SessionError) as refused:
        await runtime.start_thread(repo, tools=["glob", "format_disk"])
    assert refused.value.kind == "invalid_request" and "format_disk" in refused.value.message
    assert runtime.list_threads()[0] == []


async def test_a_resumed_thread_keeps_its_limits_and_tools(settings, repo: Path) -> None:
    first = AgentRuntime(settings(), ScriptedEngine([]))
    session = await first.start_thread(repo, limits=TurnLimits(max_steps=1), tools=["glob"])
    thread_id = session.thread.id
    await first.close()

    engine = ScriptedEngine([Reply(calls=[GLOB]), Reply(text="never asked")])
    second = AgentRuntime(settings(), engine)
    try:
        resumed = await second.open_thread(thread_id)
        turn = await resumed.run_turn(ask("again"))
        assert (turn.stop_reason, turn.usage.model_calls) == (StopReason.max_steps, 1)
        assert [spec.name for spec in engine.requests[0].tools] == ["glob"]
    finally:
        await second.close()
