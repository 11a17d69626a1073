"""The trace store: the event log and its materialized state, paging, the token layer exactly
as sampled, redaction before anything reaches the disk, consent, and schema versions.

What the protocol promises is checked against every store: SQLite, memory, and a JSON-lines
trace file read back (`MemoryTraceStore.replay`) after the writes."""

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from opencomposer.agent.protocol.common import TokenUsage
from opencomposer.agent.protocol.events import (
    ItemCompletedEvent,
    ItemStartedEvent,
    ThreadStartedEvent,
    TurnCompletedEvent,
    TurnStartedEvent,
)
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    CommandExecutionItem,
    ItemStatus,
    TextInput,
    UserMessageItem,
)
from opencomposer.agent.protocol.threads import StopReason, Thread, Turn, TurnStatus, TurnWithItems
from opencomposer.agent.traces.base import ModelCallRecord, Outcome, TraceStore, TraceStoreError
from opencomposer.agent.traces.memory_store import MemoryTraceStore
from opencomposer.agent.traces.sqlite.schema import SCHEMA_VERSION
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.redact import MASK, Redactor

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SECRET = "sk-secret-value-123456"


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


class ReplayedStore:
    """A store whose reads come from its trace file, read back: what a trainer would see."""

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self._writer = MemoryTraceStore(redactor, path)
        self._path = path
        self.redactor = self._writer.redactor

    def __getattr__(self, name: str):
        if name.startswith(("record", "append", "create", "update", "set", "close", "flush")):
            return getattr(self._writer, name)
        self._writer.flush()
        return getattr(MemoryTraceStore.replay(self._path, self.redactor), name)


STORES = {
    "sqlite": lambda tmp_path, redactor=None: SQLiteTraceStore(tmp_path / "traces.db", redactor),
    "memory": lambda tmp_path, redactor=None: MemoryTraceStore(redactor),
    "jsonl": lambda tmp_path, redactor=None: ReplayedStore(tmp_path / "traces.jsonl", redactor),
}


@pytest.fixture(params=sorted(STORES))
def make_store(request, tmp_path: Path):
    made = []

    def make(redactor: Redactor | None = None) -> TraceStore:
        made.append(STORES[request.param](tmp_path, redactor))
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store) -> TraceStore:
    return make_store()


def new_thread(
    store: TraceStore, thread_id: str = "thr_1", workspace: str = "/w", created: datetime = T0
) -> Thread:
    thread = Thread(
        id=thread_id,
        workspace=workspace,
        title="fix the test",
        model="m",
        created_at=created,
        updated_at=created,
    )
    store.create_thread(thread, "You are a coding agent.")
    store.append(ThreadStartedEvent(seq=1, thread_id=thread_id, at=created, thread=thread))
    return thread


def command(status: ItemStatus = ItemStatus.in_progress, **fields) -> CommandExecutionItem:
    return CommandExecutionItem(
        id="i2",
        turn_id="turn_1",
        started_at=at(2),
        step=1,
        call_id="c1",
        tool="run_command",
        command="pytest -q",
        arguments={"command": "pytest -q"},
        status=status,
        **fields,
    )


def test_events_round_trip_and_materialize_the_latest_state(store: TraceStore):
    new_thread(store)
    user = UserMessageItem(
        id="i1",
        turn_id="turn_1",
        started_at=at(1),
        status="completed",
        completed_at=at(1),
        content=[TextInput(text="fix the test")],
    )
    running = command()
    finished = command(ItemStatus.completed, completed_at=at(3), exit_code=0, output="1 passed")
    answer = AgentMessageItem(
        id="i3",
        turn_id="turn_1",
        started_at=at(4),
        step=2,
        status="completed",
        completed_at=at(4),
        text="Fixed.",
    )
    started = Turn(id="turn_1", thread_id="thr_1", started_at=at(1))
    ended = started.model_copy(
        update={
            "status": TurnStatus.completed,
            "stop_reason": StopReason.answered,
            "completed_at": at(5),
            "usage": TokenUsage(prompt_tokens=100, completion_tokens=20, model_calls=2),
        }
    )
    events = [
        TurnStartedEvent(seq=2, thread_id="thr_1", at=at(1), turn=started),
        ItemStartedEvent(seq=3, thread_id="thr_1", at=at(1), item=user),
        ItemCompletedEvent(seq=4, thread_id="thr_1", at=at(1), item=user),
        ItemStartedEvent(seq=5, thread_id="thr_1", at=at(2), item=running),
    ]
    for event in events:
        store.append(event)
    assert store.items("thr_1") == [user, running]
    assert store.turn("turn_1") == started

    later = [
        ItemCompletedEvent(seq=6, thread_id="thr_1", at=at(3), item=finished),
        ItemStartedEvent(seq=7, thread_id="thr_1", at=at(4), item=answer),
        ItemCompletedEvent(seq=8, thread_id="thr_1", at=at(4), item=answer),
        TurnCompletedEvent(seq=9, thread_id="thr_1", at=at(5), turn=ended),
    ]
    for event in later:
        store.append(event)

    assert store.events("thr_1")[1:] == events + later
    assert store.events("thr_1", after_seq=7) == later[2:]
    assert store.last_seq("thr_1") == 9
    # Completing an item replaces its state but keeps its place in the log.
    assert store.turns("thr_1") == [
        TurnWithItems(**ended.model_dump(), items=[user, finished, answer])
    ]
    assert store.turn("turn_1") == ended


def test_a_failed_append_leaves_neither_the_event_nor_the_state(tmp_path: Path):
    store = SQLiteTraceStore(tmp_path / "traces.db")
    new_thread(store)
    # The event row itself is valid; its turn names a thread that does not exist, so the
    # state update fails, and the event must go with it.
    orphan = Turn(id="turn_x", thread_id="thr_missing", started_at=at(1))
    with pytest.raises(TraceStoreError, match="FOREIGN KEY"):
        store.append(TurnStartedEvent(seq=2, thread_id="thr_1", at=at(1), turn=orphan))
    assert store.last_seq("thr_1") == 1
    assert store.turn("turn_x") is None


def test_list_threads_pages_most_recent_first(store: TraceStore):
    for n in range(5):
        new_thread(store, f"thr_{n}", workspace="/a" if n % 2 else "/b", created=at(n))

    pages, cursor = [], None
    while True:
        page, cursor = store.list_threads(limit=2, cursor=cursor)
        pages.append([t.id for t in page])
        if cursor is None:
            break
    assert pages == [["thr_4", "thr_3"], ["thr_2", "thr_1"], ["thr_0"]]

    page, cursor = store.list_threads(limit=1, workspace="/a")
    assert ([t.id for t in page], cursor) == (["thr_3"], f"{at(3).isoformat()}|thr_3")
    page, cursor = store.list_threads(limit=1, cursor=cursor, workspace="/a")
    assert ([t.id for t in page], cursor) == (["thr_1"], None)

    # A thread updated between two pages is not listed again.
    page, cursor = store.list_threads(limit=2)
    store.append(
        TurnStartedEvent(
            seq=2,
            thread_id="thr_4",
            at=at(9),
            turn=Turn(id="t4", thread_id="thr_4", started_at=at(9)),
        )
    )
    assert [t.id for t in store.list_threads(limit=5, cursor=cursor)[0]] == [
        "thr_2",
        "thr_1",
        "thr_0",
    ]

    # An event moves its thread to the top.
    store.append(
        TurnStartedEvent(
            seq=2,
            thread_id="thr_0",
            at=at(10),
            turn=Turn(id="t", thread_id="thr_0", started_at=at(10)),
        )
    )
    assert [t.id for t in store.list_threads(limit=2)[0]] == ["thr_0", "thr_4"]


def test_the_token_layer_round_trips_exactly(store: TraceStore):
    new_thread(store)
    experts = np.arange(24, dtype=np.int32).reshape(3, 2, 4)
    logprobs = [-0.1, -2.5, -1e-7]
    store.record_model_call(
        ModelCallRecord(
            thread_id="thr_1",
            turn_id="turn_1",
            step=1,
            purpose="agent",
            segment=0,
            request={
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [],
                "sampling": {"temperature": 1.0},
            },
            started_at=at(1),
            duration_ms=250,
            engine="embedded",
            model="m",
            response={"text": "hello"},
            weights_version="step-120",
            prompt_token_ids=[0, 1, 2**31 - 1],
            completion_token_ids=[42, 7],
            logprobs=logprobs,
            routed_experts=experts,
        )
    )
    store.record_model_call(
        ModelCallRecord(
            thread_id="thr_1",
            turn_id="turn_1",
            step=2,
            purpose="summary",
            segment=0,
            request={"messages": []},
            started_at=at(2),
            error={"kind": "engine_unavailable", "message": "down"},
        )
    )

    calls = store.model_calls("thr_1")
    assert calls == [
        {
            "id": 1,
            "thread_id": "thr_1",
            "turn_id": "turn_1",
            "step": 1,
            "purpose": "agent",
            "segment": 0,
            "engine": "embedded",
            "model": "m",
            "weights_version": "step-120",
            "request": {
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [],
                "sampling": {"temperature": 1.0},
            },
            "response": {"text": "hello"},
            "error": None,
            "redacted": False,
            "prompt_token_ids": [0, 1, 2**31 - 1],
            "completion_token_ids": [42, 7],
            # float32, as sampled: exactly the float32 values, not the float64 ones given.
            "logprobs": [float(np.float32(v)) for v in logprobs],
            "routed_experts": experts.tolist(),
            "started_at": at(1).isoformat(),
            "duration_ms": 250,
        },
        {
            "id": 2,
            "thread_id": "thr_1",
            "turn_id": "turn_1",
            "step": 2,
            "purpose": "summary",
            "segment": 0,
            "engine": None,
            "model": None,
            "weights_version": None,
            "request": {"messages": []},
            "response": None,
            "error": {"kind": "engine_unavailable", "message": "down"},
            "redacted": False,
            "prompt_token_ids": None,
            "completion_token_ids": None,
            "logprobs": None,
            "routed_experts": None,
            "started_at": at(2).isoformat(),
            "duration_ms": 0,
        },
    ]
    assert np.asarray(calls[0]["routed_experts"]).shape == (3, 2, 4)
    assert calls[0]["logprobs"] != logprobs  # proof that the float32 rounding is kept


def test_secrets_are_redacted_before_they_reach_the_disk(tmp_path: Path, make_store):
    store = make_store(Redactor([SECRET]))
    thread = Thread(id="thr_1", workspace="/w", title=f"use {SECRET}", created_at=T0, updated_at=T0)
    store.create_thread(thread, f"The key is {SECRET}.")
    store.append(ThreadStartedEvent(seq=1, thread_id="thr_1", at=T0, thread=thread))
    leaked = command(ItemStatus.completed, output=f"OPENAI_API_KEY={SECRET}")
    store.append(ItemCompletedEvent(seq=2, thread_id="thr_1", at=at(1), item=leaked))
    store.record_model_call(
        ModelCallRecord(
            thread_id="thr_1",
            turn_id="turn_1",
            step=1,
            purpose="agent",
            segment=0,
            request={"messages": [{"role": "user", "content": f"key {SECRET}"}]},
            started_at=at(1),
            prompt_token_ids=[1, 2],
        )
    )
    store.record_model_call(
        ModelCallRecord(
            thread_id="thr_1",
            turn_id="turn_1",
            step=2,
            purpose="agent",
            segment=0,
            request={"messages": [{"role": "user", "content": "nothing here"}]},
            started_at=at(2),
        )
    )
    store.record_outcome(Outcome("thr_1", "edit_kept", {"note": SECRET}, at=at(3)))

    assert store.system_prompt("thr_1") == f"The key is {MASK}."
    assert store.thread("thr_1").title == f"use {MASK}"
    assert store.items("thr_1")[0].output == f"OPENAI_API_KEY={MASK}"
    assert store.outcomes("thr_1")[0].detail == {"note": MASK}
    with_secret, clean = store.model_calls("thr_1")
    assert with_secret["request"]["messages"][0]["content"] == f"key {MASK}"
    assert (with_secret["redacted"], clean["redacted"]) == (True, False)

    store.flush()
    for path in tmp_path.rglob("*"):  # the database, its WAL and shared memory, lock files
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path.name
    store.close()
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path.name


def test_a_secret_only_in_the_response_marks_the_call_redacted(make_store):
    store = make_store(Redactor([SECRET]))
    new_thread(store)
    store.record_model_call(
        ModelCallRecord(
            thread_id="thr_1",
            turn_id="turn_1",
            step=1,
            purpose="agent",
            segment=0,
            request={"messages": []},
            response={"text": SECRET},
            started_at=at(1),
        )
    )
    call = store.model_calls("thr_1")[0]
    assert call["response"] == {"text": MASK}
    assert call["redacted"] is True


def test_training_consent_is_no_until_given(store: TraceStore):
    assert store.consent("/w") is False
    store.set_consent("/w", True)
    store.set_consent("/other", False)
    assert (store.consent("/w"), store.consent("/other")) == (True, False)
    store.set_consent("/w", False)
    assert (store.consent("/w"), store.consent("/other")) == (False, False)


def test_a_store_from_a_newer_version_is_refused(tmp_path: Path):
    path = tmp_path / "traces.db"
    SQLiteTraceStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(TraceStoreError, match="newer opencomposer"):
        SQLiteTraceStore(path)


def test_a_version_1_store_is_brought_up_to_date_with_its_calls(tmp_path: Path):
    """Version 1 stored every call whole, without the `kept_*` columns."""
    path = tmp_path / "traces.db"
    store = SQLiteTraceStore(path)
    new_thread(store)
    store.close()
    with sqlite3.connect(path) as db:
        for column in ("kept_messages", "kept_tools", "kept_prompt_tokens"):
            db.execute(f"ALTER TABLE model_calls DROP COLUMN {column}")
        db.execute(
            "INSERT INTO model_calls (thread_id, turn_id, step, purpose, segment, request, "
            "redacted, prompt_token_ids, started_at, duration_ms) VALUES "
            "('thr_1', 'turn_1', 1, 'agent', 0, ?, 0, ?, ?, 5)",
            ('{"messages": [{"role": "user", "content": "old"}]}', b"\x07\0\0\0", T0.isoformat()),
        )
        db.execute("PRAGMA user_version = 1")
    store = SQLiteTraceStore(path)
    (old,) = store.model_calls("thr_1")
    assert old["request"] == {"messages": [{"role": "user", "content": "old"}]}
    assert old["prompt_token_ids"] == [7]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "traces.db"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(TraceStoreError, match="cannot open the trace store"):
        SQLiteTraceStore(path)
