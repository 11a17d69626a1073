"""A process killed mid-turn (kill -9): every reader of the trace store sees the turn ended as
interrupted at once, with the model calls and tokens that were recorded, whether or not the
thread is ever reopened; a turn still running in another live process is left alone."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from opencomposer.agent.protocol.items import ItemStatus
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import SessionError
from opencomposer.agent.traces.base import TraceStore
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.config import Settings

TESTS = Path(__file__).parents[1]

# Each thread's turn makes two model calls (a read, then a command that hangs), reporting
# known usage, so the recovered totals can be checked exactly.
CHILD = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from support.scripted_engine import Reply, ScriptedEngine, call
    from opencomposer.agent.runtime import AgentRuntime
    from opencomposer.agent.protocol.items import TextInput
    from opencomposer.config import Settings

    async def main():
        home, repo, threads = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
        replies = []
        for _ in range(threads):
            replies += [Reply(calls=[call("read_file", path="a.txt")], usage=(100, 10)),
                        Reply(text="Now the slow part.", usage=(200, 20),
                              calls=[call("run_terminal", command="echo halfway; sleep 60",
                                          timeout=120)])]
        runtime = AgentRuntime(Settings(home=home), ScriptedEngine(replies))
        for _ in range(threads):
            session = await runtime.start_thread(repo)
            await session.start_turn([TextInput(text="go")])
            print(session.thread.id, flush=True)
            while not any(i.type == "command_execution" for i in session.items):
                await asyncio.sleep(0.01)
        await asyncio.sleep(120)

    asyncio.run(main())
""")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n")
    return folder


@contextmanager
def running_turns(
    home: Path, repo: Path, threads: int = 1
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """A child process with `threads` turns running (each in its hanging command)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(home), str(repo), str(threads)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        ids = [child.stdout.readline().strip() for _ in range(threads)]
        assert all(ids), "the child did not start its turns"
        yield child, ids
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)
        child.stdout.close()


def kill(child: subprocess.Popen[str]) -> None:
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(10)


def killed_mid_turn(home: Path, repo: Path, threads: int = 1) -> list[str]:
    """Thread ids of `threads` turns whose process was killed while their commands ran."""
    with running_turns(home, repo, threads) as (child, ids):
        for thread_id in ids:
            wait_for_output(home, thread_id)
        kill(child)
    return ids


def wait_for_output(home: Path, thread_id: str) -> None:
    """Until the command's first output is stored (the second model call is recorded)."""
    store = SQLiteTraceStore(home / "traces.db")
    try:
        deadline = time.monotonic() + 30
        while not any(
            e.type == "item.delta" and e.delta.kind == "output" for e in store.events(thread_id)
        ):
            assert time.monotonic() < deadline, "the command's output never reached the store"
            time.sleep(0.05)
    finally:
        store.close()


def test_a_killed_turn_is_closed_when_any_store_opens(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    (thread_id,) = killed_mid_turn(home, repo)
    store = SQLiteTraceStore(home / "traces.db")  # what `traces list/show` and servers do
    try:
        (turn,) = store.turns(thread_id)
        assert store.recovered == [turn.id]
        assert (turn.status, turn.stop_reason, turn.error.kind) == (
            TurnStatus.interrupted,
            StopReason.interrupted,
            "server_stopped",
        )
        usage = turn.usage
        assert (usage.model_calls, usage.prompt_tokens, usage.completion_tokens) == (2, 300, 30)
        command = next(i for i in turn.items if i.type == "command_execution")
        assert command.status == ItemStatus.interrupted
        assert command.output == "halfway\n\n[interrupted: the server stopped]"
        assert all(item.status != ItemStatus.in_progress for item in turn.items)
        last = store.events(thread_id)[-1]
        assert last.type == "turn.completed" and last.turn.usage == usage
    finally:
        store.close()

    # The CLI reads the same: no `in_progress` turn, nothing recovered twice.
    shown = subprocess.run(
        [sys.executable, "-m", "opencomposer", "traces", "show", thread_id, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
    )
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    statuses = [turn["status"] for turn in record["turns"]]
    assert statuses == ["interrupted"]
    again = SQLiteTraceStore(home / "traces.db")
    assert again.recovered == []
    again.close()


def test_every_open_turn_is_recovered(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    ids = killed_mid_turn(home, repo, threads=3)
    store = SQLiteTraceStore(home / "traces.db")
    try:
        assert len(store.recovered) == 3
        for thread_id in ids:
            (turn,) = store.turns(thread_id)
            assert turn.status == TurnStatus.interrupted and turn.usage.model_calls == 2
    finally:
        store.close()


async def test_a_live_processs_turn_is_left_alone(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    with running_turns(home, repo) as (child, (thread_id,)):
        wait_for_output(home, thread_id)
        runtime = AgentRuntime(Settings(home=home), engine=None)  # type: ignore[arg-type]
        try:
            assert runtime.store.recovered == []
            (turn,) = runtime.store.turns(thread_id)
            assert turn.status == TurnStatus.in_progress
            with pytest.raises(SessionError, match="another opencomposer process") as caught:
                await runtime.open_thread(thread_id)
            assert caught.value.kind == "conflict"
        finally:
            await runtime.close()
        assert child.poll() is None, "opening the store disturbed the running process"
        kill(child)
    store = SQLiteTraceStore(home / "traces.db")
    assert store.turns(thread_id)[0].status == TurnStatus.interrupted
    store.close()


def test_stores_opening_at_once_close_a_turn_once(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "home"
    (thread_id,) = killed_mid_turn(home, repo)
    stores: list[TraceStore] = []
    failures: list[BaseException] = []
    start = threading.Barrier(6)

    def open_one() -> None:
        start.wait()
        try:
            stores.append(SQLiteTraceStore(home / "traces.db"))
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=open_one) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    try:
        assert failures == []
        assert sorted(len(store.recovered) for store in stores) == [0, 0, 0, 0, 0, 1]
        events = stores[0].events(thread_id)
        assert [e.type for e in events].count("turn.completed") == 1
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    finally:
        for store in stores:
            store.close()


def test_turns_recorded_without_an_owner_are_recovered(tmp_path: Path, repo: Path) -> None:
    """A database written before turns named their owner (or whose owner row is gone)."""
    home = tmp_path / "home"
    (thread_id,) = killed_mid_turn(home, repo)
    with sqlite3.connect(home / "traces.db") as db:
        db.execute("DELETE FROM turn_owners")
    store = SQLiteTraceStore(home / "traces.db")
    try:
        assert len(store.recovered) == 1
        assert store.turns(thread_id)[0].status == TurnStatus.interrupted
        assert list((home / "owners").glob("*.lock")) == [store._owner.path]
    finally:
        store.close()
    assert list((home / "owners").iterdir()) == []
