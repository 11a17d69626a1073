"""The durable trace store: every thread's event log, its turns and items, model calls with
their token layer, outcomes, consent and inline completions, in one SQLite file.

The event log is the source of truth; the `turns` and `items` tables are its materialized
latest state, updated in the same transaction as the event, so a reader never sees one
without the other. Writes are committed off the event loop, many to a transaction
(`writer.BatchWriter`); an event's `then` (telling subscribers) runs only once it is
committed, so killing the process loses nothing already streamed. Every read first waits for
the writes before it, so a reader sees everything written before it asked. Everything is
redacted on the way in.
"""

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

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
from opencomposer.agent.traces.base import (
    CompletionRecord,
    ModelCallRecord,
    Outcome,
    TraceStoreError,
    TraceStoreFull,
)
from opencomposer.agent.traces.model_calls import redact_call
from opencomposer.agent.traces.recovery import (
    OwnerLock,
    closing_events,
    owner_alive,
    recorded_usage,
    sweep_dead_owners,
)
from opencomposer.agent.traces.sqlite import calls, completions, feedback
from opencomposer.agent.traces.sqlite.schema import open_database
from opencomposer.agent.traces.writer import BatchWriter
from opencomposer.data_folder import is_full
from opencomposer.paths import private_database, tighten_tree
from opencomposer.redact import Redactor

_EVENT = TypeAdapter(Event)
_ITEM = TypeAdapter(Item)


class SQLiteTraceStore:
    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        try:
            # 0600 in a 0700 folder before SQLite writes a byte; an older installation's
            # data folder is tightened whole, once.
            if private_database(path):
                tighten_tree(path.parent)
            self._db = open_database(path)
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
            if is_full(exc):
                raise TraceStoreFull(path.parent, f"cannot open the trace store: {exc}") from exc
            raise TraceStoreError(f"cannot open the trace store {path}: {exc}") from exc
        self._writer = BatchWriter(self._db, path)
        self._closed = False

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
        finally:
            self._db.close()
            self._owner.close()

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        self._writer.flush()
        with self._writer.lock:
            yield self._db

    def _write(self, write: Callable[[sqlite3.Connection], None]) -> None:
        self._writer.submit(write)

    def _json(self, value: Any) -> str:
        return self.redactor.redact(json.dumps(value, ensure_ascii=False, default=str))

    def _model_json(self, model: BaseModel) -> str:
        return self.redactor.redact(model.model_dump_json())

    # ------------------------------------------------------------------ threads

    def create_thread(self, thread: Thread, system_prompt: str) -> None:
        row = (
            thread.id,
            thread.workspace,
            self.redactor.redact(system_prompt),
            thread.created_at.isoformat(),
            thread.updated_at.isoformat(),
            self._model_json(thread),
        )
        self._write(lambda db: _execute(db, "INSERT INTO threads VALUES (?, ?, ?, ?, ?, ?)", row))

    def update_thread(self, thread: Thread) -> None:
        row = (thread.updated_at.isoformat(), self._model_json(thread), thread.id)
        self._write(
            lambda db: _execute(
                db, "UPDATE threads SET updated_at = ?, payload = ? WHERE id = ?", row
            )
        )

    def thread(self, thread_id: str) -> Thread | None:
        with self._reading() as db:
            row = db.execute(
                "SELECT payload, updated_at FROM threads WHERE id = ?", (thread_id,)
            ).fetchone()
        return _thread(*row) if row else None

    def system_prompt(self, thread_id: str) -> str:
        with self._reading() as db:
            row = db.execute(
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
        with self._reading() as db:
            rows = db.execute(
                f"SELECT payload, updated_at, id FROM threads {clause} "
                "ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*args, limit + 1),
            ).fetchall()
        threads = [_thread(payload, updated) for payload, updated, _ in rows[:limit]]
        more = len(rows) > limit
        return threads, f"{rows[limit - 1][1]}|{rows[limit - 1][2]}" if more else None

    # ------------------------------------------------------------------ the event log

    def append(
        self,
        event: Event,
        then: Callable[[], None] | None = None,
        failed: Callable[[TraceStoreError], None] | None = None,
    ) -> None:
        self._writer.submit(lambda db: self._append(db, event), then, failed)

    def _append(self, db: sqlite3.Connection, event: Event) -> None:
        """Store one event and the state it changes, inside a transaction the caller holds."""
        plain = event.model_dump_json()
        payload = self.redactor.redact(plain)
        db.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?)",
            (event.thread_id, event.seq, event.type, payload),
        )
        if isinstance(event, ItemStartedEvent | ItemCompletedEvent):
            item = event.item
            # The item is inside the event: with nothing to mask there, nothing in it either.
            item_json = self._model_json(item) if payload != plain else item.model_dump_json()
            db.execute(
                "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, id) "
                "DO UPDATE SET status = excluded.status, payload = excluded.payload",
                (
                    event.thread_id,
                    item.id,
                    item.turn_id,
                    event.seq,
                    item.type,
                    item.status,
                    item_json,
                ),
            )
        elif isinstance(event, TurnStartedEvent | TurnCompletedEvent):
            turn = event.turn
            db.execute(
                "INSERT INTO turns VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) "
                "DO UPDATE SET status = excluded.status, payload = excluded.payload",
                (turn.id, turn.thread_id, event.seq, turn.status, self._model_json(turn)),
            )
            if isinstance(event, TurnStartedEvent):
                db.execute(
                    "INSERT OR REPLACE INTO turn_owners VALUES (?, ?)", (turn.id, self._owner.id)
                )
            else:
                db.execute("DELETE FROM turn_owners WHERE turn_id = ?", (turn.id,))
        if not isinstance(event, ThreadStartedEvent):
            db.execute(
                "UPDATE threads SET updated_at = ? WHERE id = ?",
                (event.at.isoformat(), event.thread_id),
            )

    def _recover_abandoned_turns(self) -> list[str]:
        """Close every running turn whose owner is gone (`recovery`), in one write
        transaction, so two stores opening at once cannot both close the same turn. Runs
        before the writer starts, on the opening thread."""
        db = self._db
        recovered: list[str] = []
        db.execute("BEGIN IMMEDIATE")
        try:
            running = db.execute(
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
                    _open_items(db, turn.id),
                    _streamed(db, turn.thread_id, position),
                    _recorded_usage(db, turn.id),
                    _last_seq(db, turn.thread_id) + 1,
                ):
                    self._append(db, event)
                recovered.append(turn.id)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return recovered

    def last_seq(self, thread_id: str) -> int:
        with self._reading() as db:
            return _last_seq(db, thread_id)

    def events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        with self._reading() as db:
            rows = db.execute(
                "SELECT payload FROM events WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (thread_id, after_seq, -1 if limit is None else limit),
            ).fetchall()
        return [_EVENT.validate_json(row[0]) for row in rows]

    def items(self, thread_id: str) -> list[Item]:
        """The thread's items in log order, each in its latest state."""
        with self._reading() as db:
            return _items(db, thread_id)

    def last_turn_id(self, thread_id: str) -> str | None:
        """The thread's latest turn, without reading the turns and their items."""
        with self._reading() as db:
            row = db.execute(
                "SELECT id FROM turns WHERE thread_id = ? ORDER BY position DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
        return row[0] if row else None

    def turns(self, thread_id: str) -> list[TurnWithItems]:
        with self._reading() as db:
            turns = [
                TurnWithItems.model_validate_json(row[0])
                for row in db.execute(
                    "SELECT payload FROM turns WHERE thread_id = ? ORDER BY position", (thread_id,)
                )
            ]
            items = _items(db, thread_id)
        by_id = {turn.id: turn for turn in turns}
        for item in items:
            if item.turn_id in by_id:
                by_id[item.turn_id].items.append(item)
        return turns

    def turn(self, turn_id: str) -> Turn | None:
        with self._reading() as db:
            row = db.execute("SELECT payload FROM turns WHERE id = ?", (turn_id,)).fetchone()
        return Turn.model_validate_json(row[0]) if row else None

    # ------------------------------------------------------------------ model calls

    def record_model_call(self, call: ModelCallRecord, redactor: Redactor | None = None) -> None:
        texts = redact_call(call, redactor or self.redactor)
        self._write(lambda db: calls.insert_call(db, call, texts))

    def model_calls(self, thread_id: str) -> list[dict[str, Any]]:
        with self._reading() as db:
            return calls.read_calls(db, thread_id)

    # ------------------------------------------------------------------ outcomes, consent

    def record_outcome(self, outcome: Outcome) -> None:
        detail = self._json(outcome.detail)
        self._write(lambda db: feedback.insert_outcome(db, outcome, detail))

    def outcomes(self, thread_id: str) -> list[Outcome]:
        with self._reading() as db:
            return feedback.read_outcomes(db, thread_id)

    def set_consent(self, workspace: str, allowed: bool) -> None:
        self._write(lambda db: feedback.write_consent(db, workspace, allowed))

    def consent(self, workspace: str) -> bool:
        """Whether the user allowed this workspace's traces to be used for training."""
        with self._reading() as db:
            return feedback.read_consent(db, workspace)

    # ------------------------------------------------------------------ inline completions

    def record_completion(self, record: CompletionRecord) -> None:
        self._write(lambda db: completions.insert_completion(db, record, self.redactor))

    def record_completion_event(
        self, completion_id: str, kind: str, detail: dict[str, Any] | None = None
    ) -> bool:
        """Add what the user did with a completion; False (nothing written) when the id is not
        a recorded completion, which editors can send after a restart or for another server.
        Its answer is needed now, so it is written at once, after what is queued."""
        text = self._json(detail or {})
        with self._reading() as db, db:
            return completions.insert_completion_event(db, completion_id, kind, text)

    def completion(self, completion_id: str) -> CompletionRecord | None:
        with self._reading() as db:
            rows = completions.read_completions(db, "WHERE id = ?", (completion_id,))
        return rows[0] if rows else None

    def completions(self, limit: int = 50) -> list[CompletionRecord]:
        """The most recent completions first, each with its events in order."""
        with self._reading() as db:
            return completions.read_completions(db, "ORDER BY rowid DESC LIMIT ?", (limit,))


def _execute(db: sqlite3.Connection, sql: str, row: tuple[object, ...]) -> None:
    db.execute(sql, row)


def _thread(payload: str, updated_at: str) -> Thread:
    """A stored thread with its time of last change (kept in its own column: every event
    moves it, and rewriting the payload each time would cost a JSON encode per event)."""
    thread = Thread.model_validate_json(payload)
    return thread.model_copy(update={"updated_at": datetime.fromisoformat(updated_at)})


def _last_seq(db: sqlite3.Connection, thread_id: str) -> int:
    row = db.execute("SELECT MAX(seq) FROM events WHERE thread_id = ?", (thread_id,)).fetchone()
    return row[0] or 0


def _items(db: sqlite3.Connection, thread_id: str) -> list[Item]:
    rows = db.execute(
        "SELECT payload FROM items WHERE thread_id = ? ORDER BY position", (thread_id,)
    ).fetchall()
    return [_ITEM.validate_json(row[0]) for row in rows]


def _open_items(db: sqlite3.Connection, turn_id: str) -> list[Item]:
    rows = db.execute(
        "SELECT payload FROM items WHERE turn_id = ? AND status = ? ORDER BY position",
        (turn_id, ItemStatus.in_progress),
    )
    return [_ITEM.validate_json(row[0]) for row in rows]


def _streamed(db: sqlite3.Connection, thread_id: str, after_seq: int) -> dict[str, str]:
    """Text each item streamed after `after_seq` (a turn's start), joined."""
    pieces: dict[str, list[str]] = {}
    for (payload,) in db.execute(
        "SELECT payload FROM events WHERE thread_id = ? AND seq > ? AND type = ? ORDER BY seq",
        (thread_id, after_seq, "item.delta"),
    ):
        event = _EVENT.validate_json(payload)
        assert isinstance(event, ItemDeltaEvent)
        pieces.setdefault(event.item_id, []).append(event.delta.text)
    return {item_id: "".join(texts) for item_id, texts in pieces.items()}


def _recorded_usage(db: sqlite3.Connection, turn_id: str) -> TokenUsage:
    rows = db.execute("SELECT response FROM model_calls WHERE turn_id = ? ORDER BY id", (turn_id,))
    return recorded_usage(None if row[0] is None else json.loads(row[0]) for row in rows)
