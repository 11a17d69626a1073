"""The trace store as the source of truth: a killed process loses nothing it streamed, a
thread resumes from the log, secrets never reach the file, outcomes are recorded."""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    CommandExecutionItem,
    ItemStatus,
)
from opencomposer.agent.protocol.threads import TurnStatus
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore

from .conftest import text

TESTS = Path(__file__).parents[2]

# A turn that streams some text, then runs a command that prints and hangs: the parent kills
# this process while the command runs.
CRASHING_TURN = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from support.scripted_engine import Reply, ScriptedEngine, call
    from opencomposer.agent.runtime import AgentRuntime
    from opencomposer.agent.protocol.items import TextInput
    from opencomposer.config import Settings

    async def main():
        home, repo = Path(sys.argv[1]), Path(sys.argv[2])
        engine = ScriptedEngine([Reply(text="Running the slow script now.", calls=[call(
            "run_terminal", command="echo halfway; sleep 60", timeout=120)])])
        runtime = AgentRuntime(Settings(home=home), engine)
        session = await runtime.start_thread(repo)
        print(session.thread.id, flush=True)
        await session.run_turn([TextInput(text="run the slow script")])

    asyncio.run(main())
""")


async def test_a_killed_process_loses_nothing_and_the_thread_resumes(
    make_runtime, repo: Path, tmp_path: Path, settings
) -> None:
    home = settings().home
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING_TURN, str(home), str(repo)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        thread_id = child.stdout.readline().strip()
        store = SQLiteTraceStore(home / "traces.db")
        deadline = time.monotonic() + 30
        while not any(
            e.type == "item.delta" and getattr(e.delta, "kind", "") == "output"
            for e in store.events(thread_id)
        ):
            assert time.monotonic() < deadline, "the command's output never reached the store"
            await asyncio.sleep(0.05)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.stdout.close()

    stored = {item.type: item for item in store.items(thread_id)}
    assert stored["agent_message"].text == "Running the slow script now."
    assert stored["command_execution"].status == ItemStatus.in_progress
    store.close()

    engine = ScriptedEngine([Reply(text="It was cut off; shall I run it again?")])
    runtime = AgentRuntime(settings(), engine)
    try:
        session = await runtime.open_thread(thread_id)
        crashed = runtime.store.turns(thread_id)[0]
        assert (crashed.status, crashed.error.kind) == (TurnStatus.interrupted, "server_stopped")
        command = next(i for i in session.items if isinstance(i, CommandExecutionItem))
        assert command.status == ItemStatus.interrupted
        assert command.output == "halfway\n\n[interrupted: the server stopped]"
        turn = await session.run_turn(text("what happened?"))
        assert turn.status == TurnStatus.completed
        prompt = engine.requests[0].messages
        assert [m.role for m in prompt] == ["system", "user", "assistant", "tool", "user"]
        assert prompt[3].content == command.output
        assert prompt[0].content == runtime.store.system_prompt(thread_id)
    finally:
        await runtime.close()


async def test_secrets_are_redacted_in_the_stored_trace(make_runtime, repo: Path, settings) -> None:
    (repo / ".env").write_text("SERVICE_TOKEN=tok-9f8e7d6c5b4a3210\n")
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    engine = ScriptedEngine(
        [Reply(calls=[call("run_terminal", command="cat .env")]), Reply(text="Your key is " + key)]
    )
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    await session.run_turn(text(f"my key is {key}; show .env"))
    await session.close()
    runtime.store.close()
    raw = b"".join(path.read_bytes() for path in settings().home.glob("traces.db*"))
    assert key.encode() not in raw
    assert b"tok-9f8e7d6c5b4a3210" not in raw
    assert b"[REDACTED]" in raw
    # The model never saw the .env value either (the harness masked the command output).
    assert "tok-9f8e7d6c5b4a3210" not in (engine.requests[1].messages[-1].content or "")
    runtime.store = SQLiteTraceStore(settings().home / "traces.db")


async def test_followups_record_what_became_of_the_edits(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine(
        [
            Reply(
                calls=[
                    call("write_file", path="a.txt", content="agent a\n"),
                    call("write_file", path="b.txt", content="agent b\n"),
                    call("write_file", path="c.txt", content="agent c\n"),
                ]
            ),
            Reply(text="wrote three files"),
            Reply(text="ok"),
        ]
    )
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    first = await session.run_turn(text("write files"))
    (repo / "b.txt").unlink()  # the user reverted this one
    (repo / "c.txt").write_text("user rewrote it\n")
    await session.run_turn(text("thanks"))
    outcomes = {
        (o.kind, o.detail.get("path"))
        for o in runtime.store.outcomes(session.thread.id)
        if o.turn_id == first.id
    }
    assert outcomes == {
        ("user_followup", None),
        ("edit_kept", "a.txt"),
        ("edit_reverted", "b.txt"),
        ("edit_modified", "c.txt"),
    }


async def test_a_client_leaving_records_what_became_of_the_last_edits(
    make_runtime, repo: Path
) -> None:
    engine = ScriptedEngine(
        [
            Reply(
                calls=[
                    call("write_file", path="a.txt", content="a\n"),
                    call("write_file", path="b.txt", content="b\n"),
                ]
            ),
            Reply(text="wrote two files"),
        ]
    )
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("write files"))
    (repo / "b.txt").unlink()
    thread_id = session.thread.id
    reader = runtime.store  # closing the runtime closes it; read what it wrote first
    await session.close()
    outcomes = {
        (o.kind, o.detail["path"], o.detail["when"])
        for o in reader.outcomes(thread_id)
        if o.turn_id == turn.id
    }
    assert outcomes == {
        ("edit_kept", "a.txt", "session_end"),
        ("edit_reverted", "b.txt", "session_end"),
    }


async def test_threads_are_independent_in_one_runtime(
    make_runtime, repo: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    engine = ScriptedEngine([Reply(text="one", delay=0.02), Reply(text="two", delay=0.02)])
    runtime = make_runtime(engine)
    first = await runtime.start_thread(repo)
    second = await runtime.start_thread(other)
    turns = await asyncio.gather(first.run_turn(text("a")), second.run_turn(text("b")))
    assert [t.status for t in turns] == [TurnStatus.completed] * 2
    assert first.harness is not second.harness
    texts = sorted(
        i.text for s in (first, second) for i in s.items if isinstance(i, AgentMessageItem)
    )
    assert texts == ["one", "two"]
    listed, _ = runtime.list_threads()
    assert {t.id for t in listed} == {first.thread.id, second.thread.id}


async def test_open_unknown_thread_is_a_clear_error(make_runtime) -> None:
    import pytest

    from opencomposer.agent.session import SessionError

    runtime: AgentRuntime = make_runtime([])
    with pytest.raises(SessionError, match="no thread thr_nope"):
        await runtime.open_thread("thr_nope")
