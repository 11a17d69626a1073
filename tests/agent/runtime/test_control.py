"""Interrupt, steer and approvals: a client controlling a running turn."""

import asyncio
from pathlib import Path

import pytest
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.protocol.common import ApprovalMode, ApprovalPolicy
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    ApprovalDecision,
    ApprovalRequestItem,
    CommandExecutionItem,
    ItemStatus,
    UserMessageItem,
)
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.session import SessionError

from .conftest import text


async def _wait_for(predicate, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_interrupt_during_the_model_stream_closes_it(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine([Reply(text="a long answer that never ends", hang_after=3)])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.start_turn(text("hi"))
    await _wait_for(lambda: any(isinstance(i, AgentMessageItem) for i in session.items))
    ended = await session.interrupt(turn.id)
    assert (ended.status, ended.stop_reason) == (TurnStatus.interrupted, StopReason.interrupted)
    assert engine.closed_mid_stream == 1
    message = next(i for i in session.items if isinstance(i, AgentMessageItem))
    assert (message.status, message.text) == (ItemStatus.interrupted, "a long answe")
    # The thread goes on: the next turn sees the interrupted text as said.
    engine.replies.append(Reply(text="ok"))
    await session.run_turn(text("continue"))
    assert engine.requests[-1].messages[2].content == "a long answe"


async def test_interrupt_kills_a_running_command(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine(
        [Reply(calls=[call("run_terminal", command="echo started; sleep 60", timeout=120)])]
    )
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.start_turn(text("run it"))
    await _wait_for(
        lambda: any(
            isinstance(i, CommandExecutionItem) and session.item_log.streamed(i.id)
            for i in session.items
        )
    )
    ended = await session.interrupt(turn.id)
    assert ended.status == TurnStatus.interrupted
    command = next(i for i in session.items if isinstance(i, CommandExecutionItem))
    assert command.status == ItemStatus.interrupted
    assert command.output == "started\n\n[interrupted: the user stopped the turn]"
    assert not session.harness.jobs._jobs  # the process tree is gone, not left running


async def test_steer_is_seen_at_the_next_step(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine(
        [
            Reply(calls=[call("run_terminal", command="sleep 0.5")]),
            Reply(text="done, in French as asked"),
        ]
    )
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.start_turn(text("do it"))
    await _wait_for(lambda: any(isinstance(i, CommandExecutionItem) for i in session.items))
    item_id = session.steer(turn.id, text("answer in French"))
    await session.wait(turn.id)
    steer = session.item(item_id)
    assert isinstance(steer, UserMessageItem) and steer.steer
    roles = [m.role for m in engine.requests[1].messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert engine.requests[1].messages[-1].content == "answer in French"


async def test_steer_after_the_final_answer_gets_another_step(make_runtime, repo) -> None:
    engine = ScriptedEngine([Reply(text="first answer", delay=0.05), Reply(text="revised")])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.start_turn(text("q"))
    await _wait_for(lambda: any(isinstance(i, AgentMessageItem) for i in session.items))
    session.steer(turn.id, text("also mention tests"))
    ended = await session.wait(turn.id)
    assert ended.usage.model_calls == 2
    assert engine.requests[1].messages[-1].content == "also mention tests"


async def test_one_turn_at_a_time(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine([Reply(text="slow", hang_after=1)])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.start_turn(text("one"))
    with pytest.raises(SessionError, match="still running"):
        await session.start_turn(text("two"))
    with pytest.raises(SessionError):
        session.steer("turn_other", text("x"))
    await session.interrupt(turn.id)


async def test_two_requests_at_once_start_one_turn(make_runtime, repo: Path) -> None:
    """Starting a turn awaits the workspace facts (git): a second request arriving then must
    not start a second turn beside it."""
    engine = ScriptedEngine([Reply(text="one answer"), Reply(text="never asked")])
    session = await make_runtime(engine).start_thread(repo)
    outcomes = await asyncio.gather(
        session.start_turn(text("one")), session.start_turn(text("two")), return_exceptions=True
    )
    started = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, SessionError)]
    assert len(started) == 1 and len(refused) == 1
    await session.wait(started[0].id)
    assert len(engine.requests) == 1


DELETE = call("run_terminal", command="rm -rf build")
ASK_WRITES = ApprovalPolicy(writes_workspace=ApprovalMode.ask)


async def _approval_turn(
    make_runtime,
    repo: Path,
    decision: ApprovalDecision | None,
    message: str | None = None,
    subscribe: bool = True,
):
    (repo / "build").mkdir()
    engine = ScriptedEngine([Reply(calls=[DELETE]), Reply(text="finished")])
    session = await make_runtime(engine).start_thread(repo, approval_policy=ASK_WRITES)
    events = session.subscribe(answers_approvals=True) if subscribe else None
    turn = await session.start_turn(text("clean up"))
    if decision is not None:
        await _wait_for(lambda: bool(session._approvals))
        request = next(i for i in session.items if isinstance(i, ApprovalRequestItem))
        answered = session.respond_approval(request.id, decision, message)
        assert answered.decision == decision and answered.decided_by == "client"
    ended = await session.wait(turn.id)
    if events is not None:
        events.close()
    return session, engine, ended


async def test_approved_call_runs(make_runtime, repo: Path) -> None:
    session, _, turn = await _approval_turn(make_runtime, repo, ApprovalDecision.approve)
    assert turn.status == TurnStatus.completed and not (repo / "build").exists()
    request = next(i for i in session.items if isinstance(i, ApprovalRequestItem))
    assert (request.tool, request.action_class, request.summary) == (
        "run_terminal",
        "writes_workspace",
        "rm -rf build",
    )
    assert request.reason == "approval needed by the rule for writes workspace calls"


async def test_denied_call_tells_the_model_why(make_runtime, repo: Path) -> None:
    session, engine, turn = await _approval_turn(
        make_runtime, repo, ApprovalDecision.deny, "keep the build folder"
    )
    assert turn.status == TurnStatus.completed and (repo / "build").exists()
    command = next(i for i in session.items if isinstance(i, CommandExecutionItem))
    assert command.status == ItemStatus.declined
    result = engine.requests[1].messages[-1]
    assert result.role == "tool" and "not approved: keep the build folder" in result.content


async def test_abort_interrupts_the_turn(make_runtime, repo: Path) -> None:
    _, engine, turn = await _approval_turn(make_runtime, repo, ApprovalDecision.abort)
    assert turn.status == TurnStatus.interrupted and len(engine.requests) == 1


async def test_no_client_means_deny(make_runtime, repo: Path) -> None:
    session, _, turn = await _approval_turn(make_runtime, repo, None, subscribe=False)
    request = next(i for i in session.items if isinstance(i, ApprovalRequestItem))
    assert (request.decision, request.decided_by) == (ApprovalDecision.deny, "no_client")
    assert (repo / "build").exists()
    assert turn.status == TurnStatus.completed


async def test_client_leaving_denies_pending_approvals(make_runtime, repo: Path) -> None:
    (repo / "build").mkdir()
    engine = ScriptedEngine([Reply(calls=[DELETE]), Reply(text="ok")])
    session = await make_runtime(engine).start_thread(repo, approval_policy=ASK_WRITES)
    events = session.subscribe(answers_approvals=True)
    turn = await session.start_turn(text("clean"))
    await _wait_for(lambda: bool(session._approvals))
    events.close()
    await session.wait(turn.id)
    request = next(i for i in session.items if isinstance(i, ApprovalRequestItem))
    assert request.decided_by == "no_client" and (repo / "build").exists()


async def test_approve_for_thread_is_remembered(make_runtime, repo: Path) -> None:
    (repo / "a").mkdir()
    (repo / "b").mkdir()
    engine = ScriptedEngine(
        [
            Reply(calls=[call("run_terminal", command="rm -rf a")]),
            Reply(calls=[call("run_terminal", command="rm -rf b")]),
            Reply(text="both gone"),
        ]
    )
    session = await make_runtime(engine).start_thread(repo, approval_policy=ASK_WRITES)
    events = session.subscribe(answers_approvals=True)
    turn = await session.start_turn(text("clean"))
    await _wait_for(lambda: bool(session._approvals))
    session.respond_approval(next(iter(session._approvals)), ApprovalDecision.approve_for_thread)
    await session.wait(turn.id)
    events.close()
    requests = [i for i in session.items if isinstance(i, ApprovalRequestItem)]
    assert len(requests) == 1 and not (repo / "a").exists() and not (repo / "b").exists()


async def test_policy_rules_by_tool_and_command(make_runtime, repo: Path) -> None:
    policy = ApprovalPolicy(
        writes_workspace=ApprovalMode.ask,
        tools={"write_file": ApprovalMode.deny},
        commands={"git push": ApprovalMode.deny, "python -m pytest": ApprovalMode.auto},
    )
    engine = ScriptedEngine(
        [
            Reply(
                calls=[
                    call("write_file", path="x.txt", content="x"),
                    call("run_terminal", command="python -m pytest -q --co"),
                    call("run_terminal", command="echo hi && git push origin main"),
                ]
            ),
            Reply(text="ok"),
        ]
    )
    session = await make_runtime(engine).start_thread(repo, approval_policy=policy)
    await session.run_turn(text("go"))
    write, pytest_run, push = (
        i for i in session.items if i.type in ("file_change", "command_execution")
    )
    assert write.status == ItemStatus.declined and not (repo / "x.txt").exists()
    assert pytest_run.status == ItemStatus.completed
    assert push.status == ItemStatus.declined
    assert "the command rule 'git push'" in (push.output or "")
    assert not [i for i in session.items if isinstance(i, ApprovalRequestItem)]


async def test_repeated_identical_failures_stop_the_turn(make_runtime, repo: Path) -> None:
    missing = call("read_file", path="nope.py")
    engine = ScriptedEngine([Reply(calls=[missing])] * 6)
    session = await make_runtime(engine, repetition_limit=3).start_thread(repo)
    turn = await session.run_turn(text("read it"))
    assert (turn.status, turn.stop_reason) == (TurnStatus.completed, StopReason.repetition)
    assert len(engine.requests) == 3
    # The model was warned before the stop.
    assert "same failing call 2 times" in engine.requests[2].messages[-1].content


async def test_polling_a_job_is_not_repetition(make_runtime, repo: Path) -> None:
    start = call("run_terminal", command="sleep 5; echo ready", background=True)
    poll = call("terminal_output", job_id="job-1", wait=0.05)
    engine = ScriptedEngine(
        [Reply(calls=[start]), *[Reply(calls=[poll])] * 5, Reply(text="it is ready")]
    )
    session = await make_runtime(engine, repetition_limit=2).start_thread(repo)
    turn = await session.run_turn(text("start and wait"))
    assert turn.stop_reason == StopReason.answered
