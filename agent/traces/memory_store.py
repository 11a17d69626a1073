"""A trace store in memory, optionally written through to a JSON-lines file: for rollouts.

An RL run starts thousands of short threads whose traces go straight to a trainer; a database
per rollout (or one shared by all, behind one writer) is cost without use there. This store
keeps the same records as `SQLiteTraceStore` (redacted the same way, model calls kept as what
each adds to the previous one) in dictionaries, so it answers every read of the protocol, and
with `path` it appends each record to a file as it is made (one JSON object a line), which
`MemoryTraceStore.replay` reads back into a store that answers the same reads. An event is
stored, in memory and on the file, before `append` tells anyone of it.
"""

import bisect
import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
from pydantic import BaseModel, TypeAdapter

from opencomposer.agent.protocol.events import (
    Event,
    ItemCompletedEvent,
    ItemStartedEvent,
    ThreadStartedEvent,
    TurnCompletedEvent,
    TurnStartedEvent,
)
from opencomposer.agent.protocol.items import Item
from opencomposer.agent.protocol.threads import Thread, Turn, TurnWithItems
from opencomposer.agent.traces.base import (
    CompletionEvent,
    CompletionRecord,
    ModelCallRecord,
    Outcome,
    TraceStoreError,
    TraceStoreFull,
)
from opencomposer.agent.traces.model_calls import (
    keeps_any,
    pack,
    pack_experts,
    redact_call,
    unpack,
    unpack_experts,
    whole_calls,
)
from opencomposer.data_folder import is_full
from opencomposer.paths import private_dir, private_file
from opencomposer.redact import Redactor

_EVENT = TypeAdapter(Event)


class MemoryTraceStore:
    def __init__(self, redactor: Redactor | None = None, path: Path | None = None) -> None:
        """`path`: a JSON-lines file to append every record to (created private; an existing
        file is appended to)."""
        self.redactor = redactor or Redactor()
        self.recovered: list[str] = []
        self.path = path
        self._threads: dict[str, tuple[Thread, str]] = {}
        self._events: dict[str, list[Event]] = {}
        self._items: dict[str, dict[str, tuple[int, Item]]] = {}
        self._turns: dict[str, Turn] = {}
        self._thread_turns: dict[str, list[str]] = {}  # in the order they started
        self._calls: dict[str, list[dict[str, Any]]] = {}
        self._outcomes: dict[str, list[Outcome]] = {}
        self._consent: dict[str, bool] = {}
        self._completions: dict[str, CompletionRecord] = {}
        self._file: IO[str] | None = None
        if path is not None:
            try:
                private_dir(path.parent)
                private_file(path)
                self._file = path.open("a", encoding="utf-8")
            except OSError as exc:
                raise TraceStoreError(f"cannot open the trace file {path}: {exc}") from exc

    @classmethod
    def replay(cls, path: Path, redactor: Redactor | None = None) -> "MemoryTraceStore":
        """The store a trace file was written by, read back (not written to again)."""
        store = cls(redactor)
        try:
            with path.open(encoding="utf-8") as lines:
                for number, line in enumerate(lines, 1):
                    try:
                        store._apply(json.loads(line))
                    except (ValueError, KeyError, TypeError) as exc:
                        raise TraceStoreError(
                            f"{path}:{number}: not a trace record ({exc})"
                        ) from exc
        except OSError as exc:
            raise TraceStoreError(f"cannot read the trace file {path}: {exc}") from exc
        return store

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # ------------------------------------------------------------------ the one way in

    def _record(self, record: dict[str, Any]) -> None:
        """Apply a record (already redacted) and append it to the file."""
        self._apply(record)
        if self._file is not None:
            try:
                self._file.write(json.dumps(record, ensure_ascii=False, default=_json) + "\n")
            except OSError as exc:
                if is_full(exc) and self.path is not None:
                    raise TraceStoreFull(self.path.parent, f"cannot write {self.path}") from exc
                raise TraceStoreError(f"cannot write the trace file {self.path}: {exc}") from exc

    def _apply(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        if kind == "thread":
            thread = _model(Thread, record["thread"])
            self._threads[thread.id] = (thread, record.get("system_prompt") or self._prompt(thread))
        elif kind == "event":
            self._apply_event(_event(record["event"]))
        elif kind == "model_call":
            self._calls.setdefault(record["call"]["thread_id"], []).append(record["call"])
        elif kind == "outcome":
            outcome = record["outcome"]
            if not isinstance(outcome, Outcome):
                outcome = Outcome(**{**outcome, "at": datetime.fromisoformat(outcome["at"])})
            self._outcomes.setdefault(outcome.thread_id, []).append(outcome)
        elif kind == "consent":
            self._consent[record["workspace"]] = bool(record["allowed"])
        elif kind == "completion":
            completion = record["completion"]
            if not isinstance(completion, CompletionRecord):
                at = datetime.fromisoformat(completion["at"])
                completion = CompletionRecord(**{**completion, "at": at, "events": []})
            self._completions[completion.id] = completion
        elif kind == "completion_event":
            event = record["event"]
            if not isinstance(event, CompletionEvent):
                event = CompletionEvent(**{**event, "at": datetime.fromisoformat(event["at"])})
            self._completions[record["completion_id"]].events.append(event)
        else:
            raise KeyError(f"unknown record kind {kind!r}")

    def _prompt(self, thread: Thread) -> str:
        return self._threads[thread.id][1] if thread.id in self._threads else ""

    def _apply_event(self, event: Event) -> None:
        self._events.setdefault(event.thread_id, []).append(event)
        if isinstance(event, ItemStartedEvent | ItemCompletedEvent):
            items = self._items.setdefault(event.thread_id, {})
            position = items[event.item.id][0] if event.item.id in items else event.seq
            items[event.item.id] = (position, event.item)
        elif isinstance(event, TurnStartedEvent | TurnCompletedEvent):
            turn = event.turn
            if turn.id not in self._turns:
                self._thread_turns.setdefault(turn.thread_id, []).append(turn.id)
            self._turns[turn.id] = turn
        if not isinstance(event, ThreadStartedEvent) and event.thread_id in self._threads:
            thread, prompt = self._threads[event.thread_id]
            self._threads[event.thread_id] = (
                thread.model_copy(update={"updated_at": event.at}),
                prompt,
            )

    # ------------------------------------------------------------------ threads

    def create_thread(self, thread: Thread, system_prompt: str) -> None:
        self._record(
            {
                "kind": "thread",
                "thread": self.redactor.redact_data(thread),
                "system_prompt": self.redactor.redact(system_prompt),
            }
        )

    def update_thread(self, thread: Thread) -> None:
        self._record({"kind": "thread", "thread": self.redactor.redact_data(thread)})

    def thread(self, thread_id: str) -> Thread | None:
        entry = self._threads.get(thread_id)
        return entry[0] if entry else None

    def system_prompt(self, thread_id: str) -> str:
        entry = self._threads.get(thread_id)
        return entry[1] if entry else ""

    def list_threads(
        self, limit: int = 50, cursor: str | None = None, workspace: str | None = None
    ) -> tuple[list[Thread], str | None]:
        threads = sorted(
            (thread for thread, _ in self._threads.values()),
            key=lambda t: (t.updated_at, t.id),
            reverse=True,
        )
        if workspace:
            threads = [t for t in threads if t.workspace == workspace]
        if cursor:
            updated, _, last_id = cursor.partition("|")
            after = (datetime.fromisoformat(updated), last_id)
            threads = [t for t in threads if (t.updated_at, t.id) < after]
        page = threads[:limit]
        more = len(threads) > limit
        return page, f"{page[-1].updated_at.isoformat()}|{page[-1].id}" if more else None

    # ------------------------------------------------------------------ the event log

    def append(
        self,
        event: Event,
        then: Callable[[], None] | None = None,
        failed: Callable[[TraceStoreError], None] | None = None,
    ) -> None:
        """Stored before it returns; a failure to write the file raises (`failed` is for
        stores that learn of one later)."""
        self._record({"kind": "event", "event": self.redactor.redact_data(event)})
        if then is not None:
            then()

    def last_seq(self, thread_id: str) -> int:
        events = self._events.get(thread_id)
        return events[-1].seq if events else 0

    def events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        events = self._events.get(thread_id, [])
        start = bisect.bisect_right(events, after_seq, key=lambda event: event.seq)
        return events[start:] if limit is None else events[start : start + limit]

    def items(self, thread_id: str) -> list[Item]:
        entries = sorted(self._items.get(thread_id, {}).values(), key=lambda entry: entry[0])
        return [item for _, item in entries]

    def last_turn_id(self, thread_id: str) -> str | None:
        turns = self._thread_turns.get(thread_id)
        return turns[-1] if turns else None

    def turns(self, thread_id: str) -> list[TurnWithItems]:
        turns = [
            TurnWithItems(**self._turns[turn_id].model_dump())
            for turn_id in self._thread_turns.get(thread_id, [])
        ]
        by_id = {turn.id: turn for turn in turns}
        for item in self.items(thread_id):
            if item.turn_id in by_id:
                by_id[item.turn_id].items.append(item)
        return turns

    def turn(self, turn_id: str) -> Turn | None:
        return self._turns.get(turn_id)

    # ------------------------------------------------------------------ model calls

    def record_model_call(self, call: ModelCallRecord, redactor: Redactor | None = None) -> None:
        texts = redact_call(call, redactor or self.redactor)
        previous = self._calls.get(call.thread_id) or [{"redacted": False}]
        inherited = keeps_any(call) and previous[-1]["redacted"]
        experts, shape = pack_experts(call.routed_experts)
        stored = {
            "thread_id": call.thread_id,
            "turn_id": call.turn_id,
            "step": call.step,
            "purpose": call.purpose,
            "segment": call.segment,
            "engine": call.engine,
            "model": call.model,
            "weights_version": call.weights_version,
            "request": texts.request,
            "response": texts.response,
            "error": texts.error,
            "redacted": texts.redacted or inherited,
            # As the database keeps them: int32 ids, float32 logprobs, exactly as sampled.
            "prompt_token_ids": unpack(pack(call.prompt_token_ids, np.int32), "<i4"),
            "completion_token_ids": unpack(pack(call.completion_token_ids, np.int32), "<i4"),
            "logprobs": unpack(pack(call.logprobs, np.float32), "<f4"),
            "routed_experts": unpack_experts(experts, shape),
            "started_at": call.started_at.isoformat(),
            "duration_ms": call.duration_ms,
            "kept_messages": call.kept_messages,
            "kept_tools": call.kept_tools,
            "kept_prompt_tokens": call.kept_prompt_tokens,
        }
        self._record({"kind": "model_call", "call": stored})

    def model_calls(self, thread_id: str) -> list[dict[str, Any]]:
        stored = []
        for number, call in enumerate(self._calls.get(thread_id, []), 1):
            copy = {"id": number, **call}
            for key in ("request", "response", "error"):
                copy[key] = None if call[key] is None else json.loads(call[key])
            for key in ("prompt_token_ids", "completion_token_ids", "logprobs"):
                copy[key] = None if call[key] is None else list(call[key])
            stored.append(copy)
        return whole_calls(stored)

    # ------------------------------------------------------------------ outcomes, consent

    def record_outcome(self, outcome: Outcome) -> None:
        masked = Outcome(**{**asdict(outcome), "detail": self.redactor.redact_data(outcome.detail)})
        self._record({"kind": "outcome", "outcome": masked})

    def outcomes(self, thread_id: str) -> list[Outcome]:
        return list(self._outcomes.get(thread_id, []))

    def set_consent(self, workspace: str, allowed: bool) -> None:
        self._record({"kind": "consent", "workspace": workspace, "allowed": allowed})

    def consent(self, workspace: str) -> bool:
        return self._consent.get(workspace, False)

    # ------------------------------------------------------------------ inline completions

    def record_completion(self, record: CompletionRecord) -> None:
        masked = CompletionRecord(
            **{
                **asdict(record),
                "path": self.redactor.redact(record.path),
                "text": self.redactor.redact(record.text),
                "events": [],
            }
        )
        self._record({"kind": "completion", "completion": masked})

    def record_completion_event(
        self, completion_id: str, kind: str, detail: dict[str, Any] | None = None
    ) -> bool:
        if completion_id not in self._completions:
            return False
        event = CompletionEvent(kind, self.redactor.redact_data(detail or {}), datetime.now(UTC))
        self._record({"kind": "completion_event", "completion_id": completion_id, "event": event})
        return True

    def completion(self, completion_id: str) -> CompletionRecord | None:
        return self._completions.get(completion_id)

    def completions(self, limit: int = 50) -> list[CompletionRecord]:
        return list(reversed(self._completions.values()))[:limit]


def _json(value: Any) -> Any:
    """How records' typed values are written to the file."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not a trace record value")


def _model(kind: type[Thread], value: Any) -> Thread:
    """A record's value: the object itself in memory, its JSON form when read back."""
    return value if isinstance(value, kind) else kind.model_validate(value)


def _event(value: Any) -> Event:
    if isinstance(value, dict):
        return _EVENT.validate_python(value)
    return value
