"""Trace export: one record per thread holding the item log and the token layer, the training
consent filter, and the Parquet tables with typed token columns."""

import io
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from opencomposer.agent.protocol.common import ApprovalPolicy, TokenUsage
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
    ContextSummaryItem,
    ItemStatus,
    TextInput,
    UserMessageItem,
)
from opencomposer.agent.protocol.threads import StopReason, Thread, Turn, TurnStatus
from opencomposer.agent.traces.base import ModelCallRecord, Outcome, TraceStore
from opencomposer.agent.traces.export import (
    ExportError,
    iter_threads,
    thread_record,
    write_jsonl,
    write_parquet,
)
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EXPERTS = np.array([[[3, 1], [0, 2]], [[1, 1], [2, 3]], [[0, 3], [1, 2]]], dtype=np.int32)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def record_thread(store: TraceStore, thread_id: str, workspace: str, start: int = 0) -> None:
    """One finished turn: a request, a command, a self-summary and an answer, with three model
    calls (agent, summary, agent in the second segment) and an outcome."""
    thread = Thread(
        id=thread_id,
        workspace=workspace,
        title=f"title of {thread_id}",
        model="m",
        created_at=at(start),
        updated_at=at(start),
    )
    store.create_thread(thread, "You are a coding agent.")
    turn = Turn(id=f"{thread_id}_turn", thread_id=thread_id, started_at=at(start + 1))
    done = {"turn_id": turn.id, "status": ItemStatus.completed}
    user = UserMessageItem(
        id="i1",
        **done,
        started_at=at(start + 1),
        completed_at=at(start + 1),
        content=[TextInput(text="make the tests pass")],
    )
    run = CommandExecutionItem(
        id="i2",
        turn_id=turn.id,
        started_at=at(start + 2),
        step=1,
        call_id="c1",
        tool="run_command",
        command="pytest -q",
        arguments={"command": "pytest -q"},
    )
    ran = run.model_copy(
        update={
            "status": ItemStatus.completed,
            "completed_at": at(start + 3),
            "exit_code": 0,
            "output": "3 passed",
        }
    )
    summary = ContextSummaryItem(
        id="i3",
        **done,
        started_at=at(start + 4),
        completed_at=at(start + 4),
        text="Ran the tests.",
        tokens_before=9000,
        tokens_after=700,
    )
    answer = AgentMessageItem(
        id="i4",
        **done,
        step=2,
        started_at=at(start + 5),
        completed_at=at(start + 5),
        text="All 3 tests pass.",
    )
    ended = turn.model_copy(
        update={
            "status": TurnStatus.completed,
            "stop_reason": StopReason.answered,
            "completed_at": at(start + 6),
            "usage": TokenUsage(prompt_tokens=30, completion_tokens=6, model_calls=3),
        }
    )
    events = [
        (ThreadStartedEvent, 0, {"thread": thread}),
        (TurnStartedEvent, 1, {"turn": turn}),
        (ItemStartedEvent, 1, {"item": user}),
        (ItemCompletedEvent, 1, {"item": user}),
        (ItemStartedEvent, 2, {"item": run}),
        (ItemCompletedEvent, 3, {"item": ran}),
        (ItemStartedEvent, 4, {"item": summary}),
        (ItemCompletedEvent, 4, {"item": summary}),
        (ItemStartedEvent, 5, {"item": answer}),
        (ItemCompletedEvent, 5, {"item": answer}),
        (TurnCompletedEvent, 6, {"turn": ended}),
    ]
    for seq, (kind, seconds, fields) in enumerate(events, 1):
        store.append(kind(seq=seq, thread_id=thread_id, at=at(start + seconds), **fields))
    for step, purpose, segment in ((1, "agent", 0), (2, "summary", 0), (2, "agent", 1)):
        store.record_model_call(
            ModelCallRecord(
                thread_id=thread_id,
                turn_id=turn.id,
                step=step,
                purpose=purpose,
                segment=segment,
                request={
                    "messages": [{"role": "user", "content": "make the tests pass"}],
                    "tools": [],
                    "sampling": {"temperature": 0.7},
                },
                started_at=at(start + step),
                duration_ms=100 * step,
                engine="embedded",
                model="m",
                response={"text": f"{purpose} {step}"},
                weights_version="v7",
                prompt_token_ids=[11, 12, 13 + segment],
                completion_token_ids=[21, 22],
                logprobs=[-0.5, -0.25],
                routed_experts=EXPERTS,
            )
        )
    store.record_outcome(
        Outcome(thread_id, "edit_kept", {"path": "a.py"}, turn_id=turn.id, at=at(start + 7))
    )


@pytest.fixture
def store(tmp_path: Path):
    store = SQLiteTraceStore(tmp_path / "traces.db")
    record_thread(store, "thr_a", "/projects/a", start=0)
    record_thread(store, "thr_b", "/projects/b", start=100)
    store.set_consent("/projects/b", True)
    yield store
    store.close()


def expected_call(call_id: int, step: int, purpose: str, segment: int) -> dict:
    return {
        "id": call_id,
        "turn_id": "thr_a_turn",
        "step": step,
        "purpose": purpose,
        "segment": segment,
        "engine": "embedded",
        "model": "m",
        "weights_version": "v7",
        "request": {
            "messages": [{"role": "user", "content": "make the tests pass"}],
            "tools": [],
            "sampling": {"temperature": 0.7},
        },
        "response": {"text": f"{purpose} {step}"},
        "error": None,
        "redacted": False,
        "tokens": {
            "prompt_token_ids": [11, 12, 13 + segment],
            "completion_token_ids": [21, 22],
            "logprobs": [-0.5, -0.25],
            "routed_experts": EXPERTS.tolist(),
        },
        "started_at": at(step).isoformat(),
        "duration_ms": 100 * step,
    }


def test_a_record_holds_both_layers_of_a_thread(store: TraceStore):
    record = thread_record(store, "thr_a")
    turns = record.pop("turns")
    assert record == {
        "format": "opencomposer.trace/1",
        "thread": {
            "id": "thr_a",
            "workspace": "/projects/a",
            "title": "title of thr_a",
            "model": "m",
            "approval_policy": ApprovalPolicy().model_dump(mode="json"),
            "limits": {"max_steps": None, "max_tokens": None, "max_wall_time": None},
            "tools": None,
            "created_at": "2026-11-29T12:00:00Z",
            "updated_at": "2026-11-29T12:00:06Z",
        },
        "system_prompt": "You are a coding agent.",
        "training_consent": False,
        "model_calls": [
            expected_call(1, 1, "agent", 0),
            expected_call(2, 2, "summary", 0),
            expected_call(3, 2, "agent", 1),
        ],
        "outcomes": [
            {
                "kind": "edit_kept",
                "turn_id": "thr_a_turn",
                "item_id": None,
                "detail": {"path": "a.py"},
                "at": at(7).isoformat(),
            }
        ],
    }
    assert turns == [turn.model_dump(mode="json") for turn in store.turns("thr_a")]
    assert [(i["id"], i["type"], i["status"]) for i in turns[0]["items"]] == [
        ("i1", "user_message", "completed"),
        ("i2", "command_execution", "completed"),
        ("i3", "context_summary", "completed"),
        ("i4", "agent_message", "completed"),
    ]
    assert turns[0]["items"][1]["output"] == "3 passed"
    assert (turns[0]["status"], turns[0]["stop_reason"]) == ("completed", "answered")
    json.dumps(record)  # plain JSON all the way down
    with pytest.raises(ExportError, match="unknown thread thr_nope"):
        thread_record(store, "thr_nope")


def test_iter_threads_filters_by_id_workspace_and_consent(store: TraceStore):
    def ids(**filters) -> list[str]:
        return [r["thread"]["id"] for r in iter_threads(store, **filters)]

    assert ids() == ["thr_b", "thr_a"]  # most recently updated first
    assert ids(for_training=True) == ["thr_b"]
    assert ids(workspace="/projects/a") == ["thr_a"]
    assert ids(workspace="/projects/a", for_training=True) == []
    assert ids(thread_ids=["thr_a", "thr_b"]) == ["thr_a", "thr_b"]
    assert ids(thread_ids=["thr_a", "thr_b"], workspace="/projects/b") == ["thr_b"]
    assert [r["training_consent"] for r in iter_threads(store)] == [True, False]
    with pytest.raises(ExportError, match="unknown thread thr_nope"):
        list(iter_threads(store, thread_ids=["thr_nope"]))


def test_iter_threads_pages_through_every_thread(tmp_path: Path):
    store = SQLiteTraceStore(tmp_path / "many.db")
    for n in range(450):  # more than two pages of the store's listing
        thread = Thread(id=f"thr_{n:03}", workspace="/w", created_at=at(n), updated_at=at(n))
        store.create_thread(thread, "")
    assert [r["thread"]["id"] for r in iter_threads(store)] == [
        f"thr_{n:03}" for n in reversed(range(450))
    ]
    store.close()


def test_jsonl_is_one_record_per_line(store: TraceStore):
    buffer = io.StringIO()
    assert write_jsonl(iter_threads(store), buffer) == 2
    lines = buffer.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == [
        thread_record(store, "thr_b"),
        thread_record(store, "thr_a"),
    ]


def test_parquet_tables_have_typed_token_columns(store: TraceStore, tmp_path: Path):
    folder = tmp_path / "export"
    assert write_parquet(iter_threads(store, thread_ids=["thr_a"]), folder) == 1
    assert sorted(p.name for p in folder.iterdir()) == ["items.parquet", "model_calls.parquet"]

    items = pq.read_table(folder / "items.parquet")
    assert items.schema.field("position").type == pa.int32()
    rows = items.to_pylist()
    record_items = thread_record(store, "thr_a")["turns"][0]["items"]
    assert [{**row, "payload": json.loads(row["payload"])} for row in rows] == [
        {
            "thread_id": "thr_a",
            "turn_id": "thr_a_turn",
            "item_id": item["id"],
            "position": n,
            "type": item["type"],
            "status": "completed",
            "payload": item,
        }
        for n, item in enumerate(record_items)
    ]

    calls = pq.read_table(folder / "model_calls.parquet")
    types = {name: calls.schema.field(name).type for name in calls.schema.names}
    assert {
        name: types[name]
        for name in (
            "prompt_token_ids",
            "completion_token_ids",
            "routed_experts",
            "routed_experts_shape",
        )
    } == {
        name: pa.list_(pa.int32())
        for name in (
            "prompt_token_ids",
            "completion_token_ids",
            "routed_experts",
            "routed_experts_shape",
        )
    }
    assert types["logprobs"] == pa.list_(pa.float32())
    assert types["started_at"] == pa.timestamp("us", tz="UTC")
    first = calls.to_pylist()[0]
    assert {
        key: first[key]
        for key in (
            "thread_id",
            "id",
            "turn_id",
            "step",
            "purpose",
            "segment",
            "redacted",
            "prompt_token_ids",
            "completion_token_ids",
            "logprobs",
            "started_at",
            "duration_ms",
            "error",
        )
    } == {
        "thread_id": "thr_a",
        "id": 1,
        "turn_id": "thr_a_turn",
        "step": 1,
        "purpose": "agent",
        "segment": 0,
        "redacted": False,
        "prompt_token_ids": [11, 12, 13],
        "completion_token_ids": [21, 22],
        "logprobs": [-0.5, -0.25],
        "started_at": at(1),
        "duration_ms": 100,
        "error": None,
    }
    assert json.loads(first["request"])["sampling"] == {"temperature": 0.7}
    experts = np.asarray(first["routed_experts"], np.int32).reshape(first["routed_experts_shape"])
    assert np.array_equal(experts, EXPERTS)
    assert [row["segment"] for row in calls.to_pylist()] == [0, 0, 1]


def test_parquet_of_nothing_writes_empty_typed_tables(tmp_path: Path):
    assert write_parquet(iter(()), tmp_path / "out") == 0
    calls = pq.read_table(tmp_path / "out" / "model_calls.parquet")
    assert calls.num_rows == 0
    assert calls.schema.field("logprobs").type == pa.list_(pa.float32())


def test_parquet_without_pyarrow_is_a_clear_error(
    store: TraceStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ExportError) as caught:
        write_parquet(iter_threads(store), tmp_path / "export")
    assert str(caught.value) == (
        "Parquet export needs pyarrow: pip install 'opencomposer[parquet]'"
    )
    assert not (tmp_path / "export").exists()
