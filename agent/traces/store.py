"""The trace store: every thread's event log, its turns and items, every model call with its
token layer, outcomes, per-workspace training consent, and the editor's inline completions with
what the user did with them, in one SQLite file.

The event log is the source of truth; the `turns` and `items` tables are its materialized
latest state, updated in the same transaction as the event, so a reader never sees one
without the other. WAL with `synchronous=NORMAL`: each append is committed before the event
reaches any client, so killing the process loses nothing already streamed (a power loss may
lose the last few). Everything is redacted on the way in.

Token layer: ids are stored as little-endian int32, logprobs as float32, routed experts as
int32 with their shape, exactly as sampled; they are never re-tokenized.
"""

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from opencomposer.agent.protocol.common import TokenUsage
from opencomposer.agent.protocol.events import (
    Event,
    ItemCompletedEvent,
    ItemDeltaEvent,
    ItemStartedEvent,
    ThreadStartedEvent,
    TurnCompletedEvent,
    TurnStartedEvent,
)
from opencomposer.agent.protocol.items import Item, ItemStatus
from opencomposer.agent.protocol.threads import Thread, Turn, TurnStatus, TurnWithItems
from opencomposer.agent.traces.recovery import (
    OwnerLock,
    closing_events,
    owner_alive,
    recorded_usage,
    sweep_dead_owners,
)
from opencomposer.paths import private_database, tighten_tree
from opencomposer.redact import Redactor

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    system_prompt TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_by_update ON threads (updated_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS events (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    position INTEGER NOT NULL,
    status TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_thread ON turns (thread_id, position);
CREATE TABLE IF NOT EXISTS items (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (thread_id, id)
);
CREATE INDEX IF NOT EXISTS items_by_position ON items (thread_id, position);
CREATE TABLE IF NOT EXISTS model_calls (
    id INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    turn_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    purpose TEXT NOT NULL,
    segment INTEGER NOT NULL,
    engine TEXT,
    model TEXT,
    weights_version TEXT,
    request TEXT NOT NULL,
    response TEXT,
    error TEXT,
    redacted INTEGER NOT NULL,
    prompt_token_ids BLOB,
    completion_token_ids BLOB,
    logprobs BLOB,
    routed_experts BLOB,
    routed_experts_shape TEXT,
    started_at TEXT NOT NULL,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS model_calls_by_thread ON model_calls (thread_id, id);
CREATE TABLE IF NOT EXISTS outcomes (
    id INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    turn_id TEXT,
    item_id TEXT,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outcomes_by_thread ON outcomes (thread_id, id);
CREATE TABLE IF NOT EXISTS workspaces (
    path TEXT PRIMARY KEY,
    training_consent INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS completions (
    id TEXT PRIMARY KEY,
    workspace TEXT,
    path TEXT NOT NULL,
    language TEXT,
    model TEXT,
    prefix_length INTEGER NOT NULL,
    suffix_length INTEGER NOT NULL,
    text TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS completion_events (
    id INTEGER PRIMARY KEY,
    completion_id TEXT NOT NULL REFERENCES completions (id),
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS completion_events_by_completion
    ON completion_events (completion_id, id);
CREATE TABLE IF NOT EXISTS turn_owners (
    turn_id TEXT PRIMARY KEY REFERENCES turns (id),
    owner TEXT NOT NULL
);
"""

_EVENT = TypeAdapter(Event)
_ITEM = TypeAdapter(Item)


class TraceStoreError(Exception):
    """The trace store cannot be opened or is from a newer version."""


@dataclass
class ModelCallRecord:
    """One engine request and what came back, as sent and as sampled."""

    thread_id: str
    turn_id: str
    step: int
    purpose: str
    """`agent` (a step of the turn) or `summary` (a self-summarization step)."""

    segment: int
    """Summaries before this call in the thread: a rollout is a chain of segments."""

    request: dict[str, Any]
    """Messages, tool schemas and sampling parameters exactly as sent."""

    started_at: datetime
    duration_ms: int = 0
    engine: str | None = None
    model: str | None = None
    response: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    weights_version: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    routed_experts: np.ndarray | None = None


@dataclass
class Outcome:
    thread_id: str
    kind: str
    """E.g. `edit_kept`, `edit_reverted`, `edit_modified`, `user_followup`, `undo`."""

    detail: dict[str, Any] = field(default_factory=dict)
    turn_id: str | None = None
    item_id: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class CompletionEvent:
    kind: str
    """`shown`, `accepted`, `partially_accepted` or `rejected`."""

    detail: dict[str, Any] = field(default_factory=dict)
    """E.g. `accepted_length` for a partial acceptance."""

    at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class CompletionRecord:
    """One inline completion offered in the editor; its events say what became of it."""

    id: str
    path: str
    """Relative to `workspace` when the file is inside it."""

    text: str
    prefix_length: int
    """Characters of prompt before the cursor (related documents included)."""

    suffix_length: int
    duration_ms: int
    workspace: str | None = None
    language: str | None = None
    model: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    events: list[CompletionEvent] = field(default_factory=list)
    """Filled when read back; ignored by `record_completion`."""


class TraceStore:
    """One SQLite connection, used from one thread (the runtime's event loop)."""

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        try:
            # 0600 in a 0700 folder before SQLite writes a byte; an older installation's
            # data folder is tightened whole, once.
            if private_database(path):
                tighten_tree(path.parent)
            self._db = sqlite3.connect(path, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=5000")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise TraceStoreError(
                    f"{path} was written by a newer opencomposer "
                    f"(schema {version} > {SCHEMA_VERSION})"
                )
            with self._db:
                self._db.executescript(_SCHEMA)
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._owners = path.parent / "owners"
            self._owner = OwnerLock(self._owners)
            self.recovered = self._recover_abandoned_turns()
            """Turns of dead processes this store closed when it opened."""
            sweep_dead_owners(self._owners)
        except (sqlite3.Error, OSError, TraceStoreError) as exc:
            if hasattr(self, "_owner"):
                self._owner.close()
            if hasattr(self, "_db"):
                self._db.close()
            if isinstance(exc, TraceStoreError):
                raise
            raise TraceStoreError(f"cannot open the trace store {path}: {exc}") from exc

    def close(self) -> None:
        self._db.close()
        self._owner.close()

    def _json(self, value: Any) -> str:
        return self.redactor.redact(json.dumps(value, ensure_ascii=False, default=str))

    def _model_json(self, model: Any) -> str:
        return self.redactor.redact(model.model_dump_json())

    # ------------------------------------------------------------------ threads

    def create_thread(self, thread: Thread, system_prompt: str) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO threads VALUES (?, ?, ?, ?, ?, ?)",
                (
                    thread.id,
                    thread.workspace,
                    self.redactor.redact(system_prompt),
                    thread.created_at.isoformat(),
                    thread.updated_at.isoformat(),
                    self._model_json(thread),
                ),
            )

    def update_thread(self, thread: Thread) -> None:
        with self._db:
            self._db.execute(
                "UPDATE threads SET updated_at = ?, payload = ? WHERE id = ?",
                (thread.updated_at.isoformat(), self._model_json(thread), thread.id),
            )

    def thread(self, thread_id: str) -> Thread | None:
        row = self._db.execute(
            "SELECT payload, updated_at FROM threads WHERE id = ?", (thread_id,)
        ).fetchone()
        return _thread(*row) if row else None

    def system_prompt(self, thread_id: str) -> str:
        row = self._db.execute(
            "SELECT system_prompt FROM threads WHERE id = ?", (thread_id,)
        ).fetchone()
        return row[0] if row else ""

    def list_threads(
        self, limit: int = 50, cursor: str | None = None, workspace: str | None = None
    ) -> tuple[list[Thread], str | None]:
        """Most recently updated first. The cursor names the position after the previous
        page (time and id), so a thread updated meanwhile is not listed twice."""
        where: list[str] = []
        args: list[object] = []
        if cursor:
            updated, _, last_id = cursor.partition("|")
            where.append("(updated_at, id) < (?, ?)")
            args.extend((updated, last_id))
        if workspace:
            where.append("workspace = ?")
            args.append(workspace)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._db.execute(
            f"SELECT payload, updated_at, id FROM threads {clause} "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*args, limit + 1),
        ).fetchall()
        threads = [_thread(payload, updated) for payload, updated, _ in rows[:limit]]
        more = len(rows) > limit
        return threads, f"{rows[limit - 1][1]}|{rows[limit - 1][2]}" if more else None

    # ------------------------------------------------------------------ the event log

    def append(self, event: Event) -> None:
        """Add one event and update the state it changes, atomically."""
        with self._db:
            self._append(event)

    def _append(self, event: Event) -> None:
        """`append` inside a transaction the caller holds."""
        self._db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?)",
            (event.thread_id, event.seq, event.type, self._model_json(event)),
        )
        if isinstance(event, ItemStartedEvent | ItemCompletedEvent):
            item = event.item
            self._db.execute(
                "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, id) "
                "DO UPDATE SET status = excluded.status, payload = excluded.payload",
                (
                    event.thread_id,
                    item.id,
                    item.turn_id,
                    event.seq,
                    item.type,
                    item.status,
                    self._model_json(item),
                ),
            )
        elif isinstance(event, TurnStartedEvent | TurnCompletedEvent):
            turn = event.turn
            self._db.execute(
                "INSERT INTO turns VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) "
                "DO UPDATE SET status = excluded.status, payload = excluded.payload",
                (turn.id, turn.thread_id, event.seq, turn.status, self._model_json(turn)),
            )
            if isinstance(event, TurnStartedEvent):
                self._db.execute(
                    "INSERT OR REPLACE INTO turn_owners VALUES (?, ?)", (turn.id, self._owner.id)
                )
            else:
                self._db.execute("DELETE FROM turn_owners WHERE turn_id = ?", (turn.id,))
        if not isinstance(event, ThreadStartedEvent):
            self._db.execute(
                "UPDATE threads SET updated_at = ? WHERE id = ?",
                (event.at.isoformat(), event.thread_id),
            )

    def _recover_abandoned_turns(self) -> list[str]:
        """Close every running turn whose owner is gone (`recovery`), in one write
        transaction, so two stores opening at once cannot both close the same turn."""
        recovered: list[str] = []
        self._db.execute("BEGIN IMMEDIATE")
        try:
            running = self._db.execute(
                "SELECT t.payload, t.position, o.owner FROM turns t LEFT JOIN turn_owners o "
                "ON o.turn_id = t.id WHERE t.status = ?",
                (TurnStatus.in_progress,),
            ).fetchall()
            for payload, position, owner in running:
                if owner_alive(self._owners, owner):
                    continue
                turn = Turn.model_validate_json(payload)
                for event in closing_events(
                    turn,
                    self._open_items(turn.id),
                    self._streamed(turn.thread_id, position),
                    self._recorded_usage(turn.id),
                    self.last_seq(turn.thread_id) + 1,
                ):
                    self._append(event)
                recovered.append(turn.id)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return recovered

    def _open_items(self, turn_id: str) -> list[Item]:
        rows = self._db.execute(
            "SELECT payload FROM items WHERE turn_id = ? AND status = ? ORDER BY position",
            (turn_id, ItemStatus.in_progress),
        )
        return [_ITEM.validate_json(row[0]) for row in rows]

    def _streamed(self, thread_id: str, after_seq: int) -> dict[str, str]:
        """Text each item streamed after `after_seq` (a turn's start), joined."""
        pieces: dict[str, list[str]] = {}
        for (payload,) in self._db.execute(
            "SELECT payload FROM events WHERE thread_id = ? AND seq > ? AND type = ? ORDER BY seq",
            (thread_id, after_seq, "item.delta"),
        ):
            event = _EVENT.validate_json(payload)
            assert isinstance(event, ItemDeltaEvent)
            pieces.setdefault(event.item_id, []).append(event.delta.text)
        return {item_id: "".join(texts) for item_id, texts in pieces.items()}

    def _recorded_usage(self, turn_id: str) -> TokenUsage:
        rows = self._db.execute(
            "SELECT response FROM model_calls WHERE turn_id = ? ORDER BY id", (turn_id,)
        )
        return recorded_usage(None if row[0] is None else json.loads(row[0]) for row in rows)

    def last_seq(self, thread_id: str) -> int:
        row = self._db.execute(
            "SELECT MAX(seq) FROM events WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        return row[0] or 0

    def events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        rows = self._db.execute(
            "SELECT payload FROM events WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (thread_id, after_seq, -1 if limit is None else limit),
        ).fetchall()
        return [_EVENT.validate_json(row[0]) for row in rows]

    def items(self, thread_id: str) -> list[Item]:
        """The thread's items in log order, each in its latest state."""
        rows = self._db.execute(
            "SELECT payload FROM items WHERE thread_id = ? ORDER BY position", (thread_id,)
        ).fetchall()
        return [_ITEM.validate_json(row[0]) for row in rows]

    def last_turn_id(self, thread_id: str) -> str | None:
        """The thread's latest turn, without reading the turns and their items."""
        row = self._db.execute(
            "SELECT id FROM turns WHERE thread_id = ? ORDER BY position DESC LIMIT 1", (thread_id,)
        ).fetchone()
        return row[0] if row else None

    def turns(self, thread_id: str) -> list[TurnWithItems]:
        turns = [
            TurnWithItems.model_validate_json(row[0])
            for row in self._db.execute(
                "SELECT payload FROM turns WHERE thread_id = ? ORDER BY position", (thread_id,)
            )
        ]
        by_id = {turn.id: turn for turn in turns}
        for item in self.items(thread_id):
            if item.turn_id in by_id:
                by_id[item.turn_id].items.append(item)
        return turns

    def turn(self, turn_id: str) -> Turn | None:
        row = self._db.execute("SELECT payload FROM turns WHERE id = ?", (turn_id,)).fetchone()
        return Turn.model_validate_json(row[0]) if row else None

    # ------------------------------------------------------------------ model calls

    def record_model_call(self, call: ModelCallRecord, redactor: Redactor | None = None) -> int:
        """`redactor`: the thread's (its workspace's secrets too), else the store's."""
        redactor = redactor or self.redactor
        texts = {}
        for name in ("request", "response", "error"):
            value = getattr(call, name)
            if value is not None:
                plain = json.dumps(value, ensure_ascii=False, default=str)
                texts[name] = (plain, redactor.redact(plain))
        # The token ids cannot be redacted: a call whose text was is flagged, so training can
        # leave it out.
        redacted = any(plain != masked for plain, masked in texts.values())
        request = texts["request"][1]
        experts = call.routed_experts
        with self._db:
            cursor = self._db.execute(
                "INSERT INTO model_calls (thread_id, turn_id, step, purpose, segment, engine, "
                "model, weights_version, request, response, error, redacted, prompt_token_ids, "
                "completion_token_ids, logprobs, routed_experts, routed_experts_shape, "
                "started_at, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?, ?)",
                (
                    call.thread_id,
                    call.turn_id,
                    call.step,
                    call.purpose,
                    call.segment,
                    call.engine,
                    call.model,
                    call.weights_version,
                    request,
                    texts["response"][1] if "response" in texts else None,
                    texts["error"][1] if "error" in texts else None,
                    int(redacted),
                    _pack(call.prompt_token_ids, np.int32),
                    _pack(call.completion_token_ids, np.int32),
                    _pack(call.logprobs, np.float32),
                    None if experts is None else np.ascontiguousarray(experts, "<i4").tobytes(),
                    None if experts is None else json.dumps(list(experts.shape)),
                    call.started_at.isoformat(),
                    call.duration_ms,
                ),
            )
        return int(cursor.lastrowid or 0)

    def model_calls(self, thread_id: str) -> list[dict[str, Any]]:
        """Every model call of a thread in order, token layer decoded into lists."""
        cursor = self._db.cursor()
        cursor.row_factory = sqlite3.Row
        rows = cursor.execute(
            "SELECT * FROM model_calls WHERE thread_id = ? ORDER BY id", (thread_id,)
        ).fetchall()
        calls = []
        for row in rows:
            call = dict(row)
            for key in ("request", "response", "error"):
                call[key] = None if call[key] is None else json.loads(call[key])
            call["redacted"] = bool(call["redacted"])
            call["prompt_token_ids"] = _unpack(call["prompt_token_ids"], "<i4")
            call["completion_token_ids"] = _unpack(call["completion_token_ids"], "<i4")
            call["logprobs"] = _unpack(call["logprobs"], "<f4")
            shape = call.pop("routed_experts_shape")
            experts = call["routed_experts"]
            call["routed_experts"] = (
                None
                if experts is None
                else np.frombuffer(experts, "<i4").reshape(json.loads(shape)).tolist()
            )
            calls.append(call)
        return calls

    # ------------------------------------------------------------------ outcomes, consent

    def record_outcome(self, outcome: Outcome) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO outcomes (thread_id, turn_id, item_id, kind, detail, at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    outcome.thread_id,
                    outcome.turn_id,
                    outcome.item_id,
                    outcome.kind,
                    self._json(outcome.detail),
                    outcome.at.isoformat(),
                ),
            )

    def outcomes(self, thread_id: str) -> list[Outcome]:
        rows = self._db.execute(
            "SELECT thread_id, kind, detail, turn_id, item_id, at FROM outcomes "
            "WHERE thread_id = ? ORDER BY id",
            (thread_id,),
        ).fetchall()
        return [
            Outcome(r[0], r[1], json.loads(r[2]), r[3], r[4], datetime.fromisoformat(r[5]))
            for r in rows
        ]

    def set_consent(self, workspace: str, allowed: bool) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO workspaces VALUES (?, ?, ?) ON CONFLICT (path) DO UPDATE SET "
                "training_consent = excluded.training_consent, updated_at = excluded.updated_at",
                (workspace, int(allowed), datetime.now(UTC).isoformat()),
            )

    def consent(self, workspace: str) -> bool:
        """Whether the user allowed this workspace's traces to be used for training (no
        answer is no)."""
        row = self._db.execute(
            "SELECT training_consent FROM workspaces WHERE path = ?", (workspace,)
        ).fetchone()
        return bool(row and row[0])

    # ------------------------------------------------------------------ inline completions

    def record_completion(self, record: CompletionRecord) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO completions (id, workspace, path, language, model, prefix_length, "
                "suffix_length, text, duration_ms, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.workspace,
                    self.redactor.redact(record.path),
                    record.language,
                    record.model,
                    record.prefix_length,
                    record.suffix_length,
                    self.redactor.redact(record.text),
                    record.duration_ms,
                    record.at.isoformat(),
                ),
            )

    def record_completion_event(
        self, completion_id: str, kind: str, detail: dict[str, Any] | None = None
    ) -> bool:
        """Add what the user did with a completion; False (nothing written) when the id is not
        a recorded completion, which editors can send after a restart or for another server."""
        with self._db:
            cursor = self._db.execute(
                "INSERT INTO completion_events (completion_id, kind, detail, at) "
                "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM completions WHERE id = ?)",
                (
                    completion_id,
                    kind,
                    self._json(detail or {}),
                    datetime.now(UTC).isoformat(),
                    completion_id,
                ),
            )
        return cursor.rowcount == 1

    def completion(self, completion_id: str) -> CompletionRecord | None:
        rows = self._completions("WHERE id = ?", (completion_id,))
        return rows[0] if rows else None

    def completions(self, limit: int = 50) -> list[CompletionRecord]:
        """The most recent completions first, each with its events in order."""
        return self._completions("ORDER BY rowid DESC LIMIT ?", (limit,))

    def _completions(self, clause: str, args: tuple[object, ...]) -> list[CompletionRecord]:
        rows = self._db.execute(
            "SELECT id, path, text, prefix_length, suffix_length, duration_ms, workspace, "
            f"language, model, at FROM completions {clause}",
            args,
        ).fetchall()
        records = [
            CompletionRecord(
                id=id_,
                path=path,
                text=text,
                prefix_length=prefix_length,
                suffix_length=suffix_length,
                duration_ms=duration_ms,
                workspace=workspace,
                language=language,
                model=model,
                at=datetime.fromisoformat(at),
            )
            for (
                id_,
                path,
                text,
                prefix_length,
                suffix_length,
                duration_ms,
                workspace,
                language,
                model,
                at,
            ) in rows
        ]
        for record in records:
            record.events = [
                CompletionEvent(kind, json.loads(detail), datetime.fromisoformat(at))
                for kind, detail, at in self._db.execute(
                    "SELECT kind, detail, at FROM completion_events WHERE completion_id = ? "
                    "ORDER BY id",
                    (record.id,),
                )
            ]
        return records


def _thread(payload: str, updated_at: str) -> Thread:
    """A stored thread with its time of last change (kept in its own column: every event
    moves it, and rewriting the payload each time would cost a JSON encode per event)."""
    thread = Thread.model_validate_json(payload)
    return thread.model_copy(update={"updated_at": datetime.fromisoformat(updated_at)})


def _pack(values: Iterable[float] | None, dtype: type) -> bytes | None:
    if values is None:
        return None
    return np.asarray(list(values), dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def _unpack(blob: bytes | None, dtype: str) -> list | None:
    return None if blob is None else np.frombuffer(blob, dtype).tolist()
