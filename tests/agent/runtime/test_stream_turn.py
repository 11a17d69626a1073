"""`AgentAPI.stream_turn`, the one way transports run a turn, and the turn's single deadline."""

import asyncio
from pathlib import Path

import pytest
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.common import ApprovalMode, ApprovalPolicy
from opencomposer.agent.protocol.items import (
    ApprovalDecision,
    ApprovalRequestItem,
    CommandExecutionItem,
    ItemStatus,
    TextInput,
)
from opencomposer.agent.protocol.methods import ApprovalRespondParams, TurnStartParams
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.session import SessionError

ASK_WRITES = ApprovalPolicy(writes_workspace=ApprovalMode.ask)
DELETE = call("run_terminal", command="rm -rf build")


def start(thread_id: str, words: str) -> TurnStartParams:
    return TurnStartParams(thread_id=thread_id, input=[TextInput(text=words)])


async def test_a_stream_holds_exactly_its_turn(make_runtime, repo: Path) -> None:
    runtime = make_runtime([Reply(text="first"), Reply(text="second answer")])
    api = AgentAPI(runtime, lambda: [repo])
    session = await runtime.start_thread(repo)
    await session.run_turn([TextInput(text="before")])
    async with await api.stream_turn(start(session.thread.id, "now")) as stream:
        events = [event async for event in stream]
    assert events[0].type == "turn.started" and events[0].turn.id == stream.turn.id
    assert events[-1].type == "turn.completed" and events[-1].turn.id == stream.turn.id
    assert [e.seq for e in events] == list(range(events[0].seq, events[0].seq + len(events)))
    assert stream.ended is not None and stream.ended.status == TurnStatus.completed
    texts = [
        e.item.text for e in events if e.type == "item.completed" and e.item.type == "agent_message"
    ]
    assert texts == ["second answer"]
    assert session.log.approvers() == 0


async def test_a_refused_start_leaves_no_subscriber(make_runtime, repo: Path) -> None:
    runtime = make_runtime([Reply(text="slow", hang_after=0)])
    api = AgentAPI(runtime, lambda: [repo])
    session = await runtime.start_thread(repo)
    running = await api.stream_turn(start(session.thread.id, "one"))
    assert session.log.approvers() == 1
    with pytest.raises(SessionError, match="still running"):
        await api.stream_turn(start(session.thread.id, "two"))
    assert session.log.approvers() == 1  # the refused one was closed again
    with pytest.raises(SessionError) as unknown:
        await api.stream_turn(start("thr_nope", "three"))
    assert unknown.value.kind == "not_found"
    await session.interrupt(running.turn.id)
    assert [e.type async for e in running][-1] == "turn.completed"
    assert running.ended is not None and running.ended.status == TurnStatus.interrupted


async def test_the_stream_answers_approvals_and_leaving_denies_them(
    make_runtime, repo: Path
) -> None:
    (repo / "build").mkdir()
    engine = ScriptedEngine(
        [Reply(calls=[DELETE]), Reply(text="kept it"), Reply(calls=[DELETE]), Reply(text="left it")]
    )
    runtime = make_runtime(engine)
    api = AgentAPI(runtime, lambda: [repo])
    session = await runtime.start_thread(repo, approval_policy=ASK_WRITES)

    stream = await api.stream_turn(start(session.thread.id, "clean up"))
    async for event in stream:
        if event.type == "item.started" and isinstance(event.item, ApprovalRequestItem):
            answer = ApprovalRespondParams(
                thread_id=session.thread.id,
                item_id=event.item.id,
                decision=ApprovalDecision.deny,
                message="keep build",
            )
            await api.approval_respond(answer)
    assert stream.ended is not None and stream.ended.stop_reason == StopReason.answered
    assert (repo / "build").is_dir()

    stream = await api.stream_turn(start(session.thread.id, "clean up again"))
    async for event in stream:
        if event.type == "item.started" and isinstance(event.item, ApprovalRequestItem):
            stream.close()  # the client goes without answering
    turn = await session.wait(stream.turn.id)
    request = [i for i in session.items if isinstance(i, ApprovalRequestItem)][-1]
    assert (request.decision, request.decided_by) == (ApprovalDecision.deny, "no_client")
    assert turn.status == TurnStatus.completed and (repo / "build").is_dir()


async def test_the_deadline_ends_a_turn_waiting_for_approval(make_runtime, repo: Path) -> None:
    """Wall time is one deadline over the turn: it also ends a wait nobody answers."""
    (repo / "build").mkdir()
    runtime = make_runtime([Reply(calls=[DELETE])], max_wall_time=1.0, approval_timeout=60)
    api = AgentAPI(runtime, lambda: [repo])
    session = await runtime.start_thread(repo, approval_policy=ASK_WRITES)
    async with await api.stream_turn(start(session.thread.id, "clean up")) as stream:
        async with asyncio.timeout(30):
            types = [event.type async for event in stream]
    assert types[-1] == "turn.completed"
    assert stream.ended is not None
    assert (stream.ended.status, stream.ended.stop_reason) == (
        TurnStatus.completed,
        StopReason.max_wall_time,
    )
    request = next(i for i in session.items if isinstance(i, ApprovalRequestItem))
    command = next(i for i in session.items if isinstance(i, CommandExecutionItem))
    assert request.status == ItemStatus.interrupted and command.status == ItemStatus.interrupted
    assert "ran out of wall time" in (command.output or "")
    assert not session.awaits_approval(request.id)
    assert (repo / "build").is_dir()
