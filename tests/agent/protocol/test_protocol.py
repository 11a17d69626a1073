"""The agent protocol: JSON round trips, strict validation, and a schema that cannot drift."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from opencomposer.agent.protocol import events, items, methods, threads
from opencomposer.agent.protocol.common import (
    ActionClass,
    ApprovalMode,
    ApprovalPolicy,
    ErrorInfo,
    LineRange,
    TokenUsage,
)
from opencomposer.agent.protocol.schema import protocol_schema, protocol_schema_json

REPO = Path(__file__).resolve().parents[3]
CHECKED_IN_SCHEMA = REPO / "extension-bridge/protocol/opencomposer-protocol.schema.json"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 11, 29, 12, 0, 5, tzinfo=UTC)
ITEM = TypeAdapter(items.Item)
EVENT = TypeAdapter(events.Event)


def common(item_id: str) -> dict:
    return {"id": item_id, "turn_id": "turn_1", "started_at": T0}


def done(item_id: str) -> dict:
    return {**common(item_id), "status": items.ItemStatus.completed, "completed_at": T1}


ONE_OF_EACH_ITEM = [
    items.UserMessageItem(
        **done("i1"),
        content=[
            items.TextInput(text="Fix the failing test"),
            items.FileReference(
                path="src/app.py",
                range=LineRange(start=3, end=9),
                text="def f():\n    return 1\n",
                note="E501 line too long",
            ),
        ],
    ),
    items.ReasoningItem(**done("i2"), text="The test expects 2."),
    items.AgentMessageItem(**done("i3"), text="Done: `f` now returns 2. ✓"),
    items.ToolCallItem(
        **done("i4"),
        call_id="c4",
        tool="symbols",
        arguments={"path": "a.py"},
        action_class=ActionClass.read_only,
        output="def f (1-2)",
        duration_ms=3,
    ),
    items.CommandExecutionItem(
        **done("i5"),
        call_id="c5",
        tool="run_command",
        arguments={"command": "pytest -q"},
        command="pytest -q",
        exit_code=1,
        output="1 failed",
        sandbox="bubblewrap",
    ),
    items.FileChangeItem(
        **done("i6"),
        call_id="c6",
        tool="edit_file",
        changes=[
            items.FileChange(
                path="src/app.py",
                kind=items.FileChangeKind.update,
                diff="@@ -1 +1 @@\n-return 1\n+return 2\n",
            ),
            items.FileChange(path="old.py", kind=items.FileChangeKind.move, move_to="new.py"),
        ],
    ),
    items.SearchItem(
        **done("i7"),
        call_id="c7",
        tool="grep",
        query="TODO",
        method="grep",
        match_count=120,
        file_count=9,
        truncated=True,
    ),
    items.FileReadItem(
        **done("i8"),
        call_id="c8",
        tool="read_file",
        path="src/app.py",
        range=LineRange(start=1, end=40),
        total_lines=300,
        encoding="latin-1",
    ),
    items.TodoListItem(
        **done("i9"),
        call_id="c9",
        tool="todo",
        todos=[
            items.TodoEntry(content="Reproduce", status=items.TodoStatus.completed),
            items.TodoEntry(content="Fix"),
        ],
    ),
    items.ContextSummaryItem(
        **done("i10"),
        text="Task: ...",
        method="truncation",
        tokens_before=120_000,
        tokens_after=9_000,
        summary_index=2,
    ),
    items.ApprovalRequestItem(
        **done("i11"),
        target_item_id="i5",
        tool="run_command",
        action_class=ActionClass.dangerous,
        summary="rm -rf build/",
        reason="dangerous commands ask",
        decision=items.ApprovalDecision.deny,
        decided_by="client",
        message="not now",
    ),
    items.ErrorItem(
        **{**done("i12"), "status": items.ItemStatus.failed},
        error=ErrorInfo(kind="engine_timeout", message="no output", retryable=True),
    ),
]

TURN = threads.Turn(
    id="turn_1",
    thread_id="thr_1",
    status=threads.TurnStatus.completed,
    stop_reason=threads.StopReason.answered,
    started_at=T0,
    completed_at=T1,
    usage=TokenUsage(prompt_tokens=900, completion_tokens=80, model_calls=3),
)
THREAD = threads.Thread(
    id="thr_1",
    workspace="/home/u/project",
    title="Fix test",
    model="m",
    approval_policy=ApprovalPolicy(
        network=ApprovalMode.deny, tools={"run_command": ApprovalMode.ask}
    ),
    created_at=T0,
    updated_at=T1,
)
ONE_OF_EACH_EVENT = [
    events.ThreadStartedEvent(seq=1, thread_id="thr_1", at=T0, thread=THREAD),
    events.TurnStartedEvent(seq=2, thread_id="thr_1", at=T0, turn=TURN),
    events.ItemStartedEvent(seq=3, thread_id="thr_1", at=T0, item=ONE_OF_EACH_ITEM[2]),
    events.ItemDeltaEvent(
        seq=4,
        thread_id="thr_1",
        at=T0,
        turn_id="turn_1",
        item_id="i3",
        delta=items.TextDelta(text="Done"),
    ),
    events.ItemDeltaEvent(
        seq=5,
        thread_id="thr_1",
        at=T0,
        turn_id="turn_1",
        item_id="i5",
        delta=items.OutputDelta(stream="stderr", text="E   assert 1 == 2\n"),
    ),
    events.ItemDeltaEvent(
        seq=6,
        thread_id="thr_1",
        at=T0,
        turn_id="turn_1",
        item_id="i4",
        delta=items.TextDelta(text="Let me look"),
    ),
    events.ItemCompletedEvent(seq=7, thread_id="thr_1", at=T1, item=ONE_OF_EACH_ITEM[4]),
    events.TurnCompletedEvent(seq=8, thread_id="thr_1", at=T1, turn=TURN),
]


@pytest.mark.parametrize("item", ONE_OF_EACH_ITEM, ids=lambda i: i.type)
def test_items_round_trip_through_json(item):
    wire = item.model_dump_json()
    assert ITEM.validate_json(wire) == item
    assert json.loads(wire)["type"] == item.type


@pytest.mark.parametrize("event", ONE_OF_EACH_EVENT, ids=lambda e: f"{e.seq}-{e.type}")
def test_events_round_trip_through_json(event):
    assert EVENT.validate_json(event.model_dump_json()) == event


def test_every_method_payload_round_trips():
    read = methods.ThreadReadResponse(
        thread=THREAD, turns=[threads.TurnWithItems(**TURN.model_dump(), items=ONE_OF_EACH_ITEM)]
    )
    payloads = [
        methods.ThreadStartParams(workspace="/w", approval_policy=ApprovalPolicy()),
        methods.ThreadStartResponse(thread=THREAD),
        methods.ThreadListParams(cursor="abc", limit=10),
        methods.ThreadListResponse(data=[THREAD], next_cursor=None),
        methods.ThreadReadParams(thread_id="thr_1"),
        read,
        methods.ThreadEventsParams(thread_id="thr_1", after_seq=3),
        methods.ThreadEventsResponse(events=ONE_OF_EACH_EVENT, has_more=True),
        methods.TurnStartParams(thread_id="thr_1", input=[items.TextInput(text="go")]),
        methods.TurnStartResponse(turn=TURN),
        methods.TurnInterruptParams(thread_id="thr_1", turn_id="turn_1"),
        methods.TurnInterruptResponse(turn=TURN),
        methods.TurnSteerParams(
            thread_id="thr_1", turn_id="turn_1", input=[items.TextInput(text="also run lint")]
        ),
        methods.TurnSteerResponse(item_id="i13"),
        methods.ApprovalRespondParams(
            thread_id="thr_1", item_id="i11", decision=items.ApprovalDecision.approve_for_thread
        ),
        methods.ApprovalRespondResponse(item=ONE_OF_EACH_ITEM[10]),
        methods.ApprovalRequestParams(thread_id="thr_1", item=ONE_OF_EACH_ITEM[10]),
        methods.ApprovalRequestResponse(decision=items.ApprovalDecision.abort),
    ]
    for payload in payloads:
        assert type(payload).model_validate_json(payload.model_dump_json()) == payload


def test_registry_names_every_payload_type():
    names = [m.name for m in methods.METHODS]
    assert len(names) == len(set(names))
    assert all("/" in name for name in names if name != "event")
    for method in methods.METHODS:
        if method.kind == "request":
            assert method.params.__name__.endswith("Params"), method.name
            assert method.result.__name__.endswith("Response"), method.name


def test_items_parse_from_client_json_by_type_tag():
    raw = {
        "type": "todo_list",
        "id": "i",
        "turn_id": "t",
        "call_id": "c",
        "tool": "todo",
        "started_at": "2026-11-29T12:00:00Z",
        "todos": [{"content": "x"}],
    }
    item = ITEM.validate_python(raw)
    assert item == items.TodoListItem(
        id="i",
        turn_id="t",
        call_id="c",
        tool="todo",
        started_at=T0,
        todos=[items.TodoEntry(content="x")],
    )


@pytest.mark.parametrize(
    ("payload", "model"),
    [
        (
            {"type": "user_message", "id": "i", "turn_id": "t", "content": [], "colour": "red"},
            ITEM,
        ),  # unknown field
        ({"type": "telepathy", "id": "i", "turn_id": "t"}, ITEM),  # unknown type tag
        (
            {
                "seq": 0,
                "thread_id": "t",
                "type": "turn.started",
                "turn": {"id": "x", "thread_id": "t"},
            },
            EVENT,
        ),  # seq starts at 1
        ({"thread_id": "t", "input": []}, TypeAdapter(methods.TurnStartParams)),  # empty input
        (
            {"thread_id": "t", "item_id": "i", "decision": "maybe"},
            TypeAdapter(methods.ApprovalRespondParams),
        ),
    ],
)
def test_invalid_payloads_are_rejected(payload, model):
    with pytest.raises(ValidationError):
        model.validate_python(payload)


def test_checked_in_schema_matches_the_models():
    assert CHECKED_IN_SCHEMA.read_text(encoding="utf-8") == protocol_schema_json(), (
        "the protocol changed: run `make schema` and commit the result"
    )


def test_schema_documents_every_field_and_resolves_every_reference():
    schema = protocol_schema()
    defs = schema["$defs"]
    undocumented = [
        f"{name}.{prop}"
        for name, definition in defs.items()
        for prop, spec in definition.get("properties", {}).items()
        if prop not in ("type", "kind") and not spec.get("description")
    ]
    assert undocumented == []
    refs = set()

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"].removeprefix("#/$defs/"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert refs <= set(defs)
    assert set(schema["methods"]) == {m.name for m in methods.METHODS}
