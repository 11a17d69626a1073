"""`opencomposer traces` as a user runs it, against a trace store filled through its API."""

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from opencomposer.agent.protocol.common import ErrorInfo
from opencomposer.agent.protocol.events import (
    ItemCompletedEvent,
    ThreadStartedEvent,
    TurnCompletedEvent,
    TurnStartedEvent,
)
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    CommandExecutionItem,
    ContextSummaryItem,
    FileChange,
    FileChangeItem,
    ItemStatus,
    TextInput,
    UserMessageItem,
)
from opencomposer.agent.protocol.threads import StopReason, Thread, Turn, TurnStatus
from opencomposer.agent.traces.base import CompletionRecord, ModelCallRecord, TraceStore
from opencomposer.agent.traces.export import thread_record
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore

CLI = str(Path(sys.executable).parent / "opencomposer")
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def record_thread(store: TraceStore, thread_id: str, workspace: Path, start: int) -> None:
    thread = Thread(
        id=thread_id,
        workspace=str(workspace),
        title=f"fix {thread_id}",
        created_at=at(start),
        updated_at=at(start),
        model="m",
    )
    store.create_thread(thread, "You are a coding agent.")
    turn = Turn(id=f"{thread_id}_t1", thread_id=thread_id, started_at=at(start + 1))
    done = {"turn_id": turn.id, "status": ItemStatus.completed, "started_at": at(start + 1)}
    items = [
        UserMessageItem(id="i1", **done, content=[TextInput(text="make the tests pass")]),
        CommandExecutionItem(
            id="i2",
            **done,
            call_id="c1",
            tool="run_command",
            command="pytest -q",
            exit_code=1,
            output="1 failed",
        ),
        FileChangeItem(
            id="i3",
            turn_id=turn.id,
            status=ItemStatus.failed,
            call_id="c2",
            tool="edit_file",
            changes=[FileChange(path="src/app.py", kind="update")],
            error=ErrorInfo(kind="stale_file", message="re-read src/app.py"),
        ),
        ContextSummaryItem(
            id="i4", **done, text="Tests fail in app.py.", tokens_before=9000, tokens_after=600
        ),
        AgentMessageItem(id="i5", **done, text="Fixed [the] bug."),
    ]
    ended = turn.model_copy(
        update={
            "status": TurnStatus.completed,
            "stop_reason": StopReason.answered,
            "completed_at": at(start + 9),
        }
    )
    events = [
        (ThreadStartedEvent, {"thread": thread}),
        (TurnStartedEvent, {"turn": turn}),
        *[(ItemCompletedEvent, {"item": item}) for item in items],
        (TurnCompletedEvent, {"turn": ended}),
    ]
    for seq, (kind, fields) in enumerate(events, 1):
        store.append(kind(seq=seq, thread_id=thread_id, at=at(start + seq), **fields))
    store.record_model_call(
        ModelCallRecord(
            thread_id=thread_id,
            turn_id=turn.id,
            step=1,
            purpose="agent",
            segment=0,
            request={"messages": [{"role": "user", "content": "make the tests pass"}]},
            started_at=at(start + 2),
            prompt_token_ids=[1, 2, 3],
            completion_token_ids=[4],
            logprobs=[-0.5],
            routed_experts=np.zeros((1, 2, 2), np.int32),
        )
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def workspaces(tmp_path: Path) -> tuple[Path, Path]:
    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    a.mkdir()
    b.mkdir()
    return a, b


@pytest.fixture
def filled(home: Path, workspaces: tuple[Path, Path]) -> Path:
    store = SQLiteTraceStore(home / "traces.db")
    record_thread(store, "thr_a", workspaces[0], start=0)
    record_thread(store, "thr_b", workspaces[1], start=100)
    store.close()
    return home / "traces.db"


def run(home: Path, *args: str, rc: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [CLI, "traces", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENCOMPOSER_HOME": str(home), "COLUMNS": "200"},
    )
    assert proc.returncode == rc, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def records(path: Path, *thread_ids: str) -> list[dict]:
    store = SQLiteTraceStore(path)
    try:
        return [thread_record(store, thread_id) for thread_id in thread_ids]
    finally:
        store.close()


def test_reading_commands_do_not_create_a_store(home: Path):
    assert run(home, "list").stdout == "no traces yet\n"
    assert json.loads(run(home, "list", "--json").stdout) == []
    assert run(home, "export").stdout == ""
    assert not (home / "traces.db").exists()


def test_list_shows_threads_most_recent_first(filled: Path, workspaces: tuple[Path, Path]):
    home = filled.parent
    assert json.loads(run(home, "list", "--json").stdout) == [
        {
            "id": "thr_b",
            "updated": at(108).isoformat(),
            "title": "fix thr_b",
            "workspace": str(workspaces[1]),
            "turns": 1,
        },
        {
            "id": "thr_a",
            "updated": at(8).isoformat(),
            "title": "fix thr_a",
            "workspace": str(workspaces[0]),
            "turns": 1,
        },
    ]
    table = run(home, "list").stdout.splitlines()
    assert table[0].split() == ["id", "updated", "title", "workspace", "turns"]
    assert table[1].startswith("thr_b") and table[2].startswith("thr_a")
    assert "fix thr_b" in table[1] and str(workspaces[1]) in table[1]
    only_a = json.loads(run(home, "list", "--json", "-w", str(workspaces[0])).stdout)
    assert [t["id"] for t in only_a] == ["thr_a"]
    assert [t["id"] for t in json.loads(run(home, "list", "--json", "-n", "1").stdout)] == ["thr_b"]


def test_show_prints_the_turns_readably(filled: Path):
    out = run(filled.parent, "show", "thr_a").stdout
    lines = [line.strip() for line in out.splitlines()]
    assert lines[0] == "fix thr_a  thr_a"
    assert "turn 1 · completed (answered) · 0 calls, 0 prompt + 0 completion tokens" in lines
    assert "user  make the tests pass" in lines
    assert "✓ run_command $ pytest -q (exit 1)" in lines
    assert "✗ edit_file update src/app.py" in lines
    assert "stale_file: re-read src/app.py" in lines
    assert "summary #1 (model, 9000 → 600 tokens) Tests fail in app.py." in lines
    assert "agent Fixed [the] bug." in lines  # text, not rich markup


def test_show_json_is_the_export_record(filled: Path):
    shown = json.loads(run(filled.parent, "show", "thr_a", "--json").stdout)
    assert shown == records(filled, "thr_a")[0]
    assert shown["model_calls"][0]["tokens"]["routed_experts"] == [[[0, 0], [0, 0]]]


def test_unknown_thread_is_one_line_and_exit_2(filled: Path, tmp_path: Path):
    proc = run(filled.parent, "show", "thr_nope", rc=2)
    assert proc.stderr == "opencomposer: unknown thread thr_nope\n"
    out = tmp_path / "out.jsonl"
    proc = run(filled.parent, "export", "--thread", "thr_nope", "--out", str(out), rc=2)
    assert proc.stderr == "opencomposer: unknown thread thr_nope\n"
    assert not out.exists()


def test_export_jsonl_to_stdout_and_to_a_file(
    filled: Path, tmp_path: Path, workspaces: tuple[Path, Path]
):
    home = filled.parent
    everything = records(filled, "thr_b", "thr_a")
    stdout = run(home, "export").stdout
    assert [json.loads(line) for line in stdout.splitlines()] == everything

    out = tmp_path / "exports" / "traces.jsonl"
    proc = run(home, "export", "--out", str(out), "--thread", "thr_a")
    assert [json.loads(line) for line in out.read_text().splitlines()] == everything[1:]
    assert proc.stderr == f"wrote 1 thread to {out}\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["traces.jsonl"]  # no temp file

    run(home, "export", "--out", str(out), "-w", str(workspaces[1]))
    assert [json.loads(line)["thread"]["id"] for line in out.read_text().splitlines()] == ["thr_b"]


def test_export_for_training_keeps_only_consented_workspaces(
    filled: Path, workspaces: tuple[Path, Path]
):
    home = filled.parent
    assert run(home, "export", "--for-training").stdout == ""
    run(home, "consent", "-w", str(workspaces[0]), "--allow")
    exported = [
        json.loads(line) for line in run(home, "export", "--for-training").stdout.splitlines()
    ]
    assert [(r["thread"]["id"], r["training_consent"]) for r in exported] == [("thr_a", True)]


def test_export_parquet_to_a_folder(filled: Path, tmp_path: Path):
    home = filled.parent
    proc = run(home, "export", "--format", "parquet", rc=2)
    assert "--out" in proc.stderr
    folder = tmp_path / "parquet"
    run(home, "export", "--format", "parquet", "--out", str(folder))
    items = pq.read_table(folder / "items.parquet").to_pylist()
    assert [(r["thread_id"], r["item_id"]) for r in items] == [
        (t, f"i{n}") for t in ("thr_b", "thr_a") for n in range(1, 6)
    ]
    calls = pq.read_table(folder / "model_calls.parquet").to_pylist()
    assert [(c["thread_id"], c["prompt_token_ids"], c["routed_experts_shape"]) for c in calls] == [
        ("thr_b", [1, 2, 3], [1, 2, 2]),
        ("thr_a", [1, 2, 3], [1, 2, 2]),
    ]


def test_consent_allow_show_revoke(home: Path, workspaces: tuple[Path, Path]):
    workspace = str(workspaces[0])
    assert run(home, "consent", "-w", workspace).stdout == (
        f"training consent for {workspace}: not allowed\n"
    )
    assert not (home / "traces.db").exists()  # showing creates nothing
    assert run(home, "consent", "-w", workspace, "--allow").stdout == (
        f"training consent for {workspace}: allowed\n"
    )
    assert run(home, "consent", "-w", workspace).stdout.endswith(": allowed\n")
    store = SQLiteTraceStore(home / "traces.db")
    assert store.consent(workspace) is True
    store.close()
    assert run(home, "consent", "-w", workspace, "--revoke").stdout.endswith(": not allowed\n")
    run(home, "consent", "-w", workspace, "--allow", "--revoke", rc=2)


def test_a_store_from_a_newer_version_is_one_line_and_exit_1(filled: Path):
    with sqlite3.connect(filled) as db:
        db.execute("PRAGMA user_version = 99")
    proc = run(filled.parent, "list", rc=1)
    assert proc.stderr.startswith("opencomposer: ")
    assert "newer opencomposer" in proc.stderr and proc.stderr.count("\n") == 1


def test_completions_list_what_became_of_each(home: Path):
    assert run(home, "completions").stdout == "no completions yet\n"
    store = SQLiteTraceStore(home / "traces.db")
    for number, (text, outcome) in enumerate(
        [("return a + b\n", "accepted"), ("pass", "rejected"), ("x = 1", None)]
    ):
        store.record_completion(
            CompletionRecord(
                id=f"c{number}",
                path="src/app.py",
                text=text,
                prefix_length=100,
                suffix_length=10,
                duration_ms=40 + number,
                model="m",
                at=at(number),
            )
        )
        if outcome:
            store.record_completion_event(f"c{number}", "shown")
            store.record_completion_event(f"c{number}", outcome)
    store.close()

    listed = json.loads(run(home, "completions", "--json").stdout)
    printed = run(home, "completions").stdout

    assert [(c["id"], c["events"]) for c in listed] == [
        ("c2", []),
        ("c1", ["shown", "rejected"]),
        ("c0", ["shown", "accepted"]),
    ]
    assert "return a + b" in printed and "shown, accepted" in printed
    assert printed.rstrip().endswith("accepted 1 of 2 with an outcome (50%)")
