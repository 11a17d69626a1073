"""What a trace store keeps and gives back, whatever keeps it.

The runtime, the transports and training use a store only through `TraceStore`: a thread's
event log with its turns and items in their latest state, each model call with its token
layer, outcomes and per-workspace training consent, and the editor's inline completions.
`SQLiteTraceStore` is the durable one a server uses; `MemoryTraceStore` keeps everything in
memory (and optionally appends it to a JSON-lines file) for rollouts that need no database.

The promise every store keeps: an event is stored before any subscriber is told of it
(`append`'s `then`), and what it stores is redacted on the way in.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from opencomposer.agent.protocol.events import Event
from opencomposer.agent.protocol.items import Item
from opencomposer.agent.protocol.threads import Thread, Turn, TurnWithItems
from opencomposer.data_folder import DataFolderFull
from opencomposer.redact import Redactor


class TraceStoreError(Exception):
    """The trace store cannot be opened, is from a newer version, or could not write."""


class TraceStoreFull(TraceStoreError, DataFolderFull):
    """The trace store could not write because its folder's file system is full: nothing of
    the transaction was kept, and the store is intact."""


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
    """Messages, tool schemas and sampling parameters exactly as sent; when recorded, only
    the messages (and tools) that are not kept from the thread's previous call."""

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
    kept_messages: int = 0
    """Leading messages of the request that are the thread's previous call's."""

    kept_tools: bool = False
    """The request's tools are the previous call's."""

    kept_prompt_tokens: int = 0
    """Leading prompt tokens that are the previous call's prompt and completion tokens."""


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


class EventStore(Protocol):
    """What a thread's event log needs of a store: a `TraceStore`, or the `EventBacklog` that
    holds its events while the store's folder is full."""

    def append(
        self,
        event: Event,
        then: Callable[[], None] | None = None,
        failed: Callable[[TraceStoreError], None] | None = None,
    ) -> None: ...
    def events(
        self, thread_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]: ...
    def last_seq(self, thread_id: str) -> int: ...


class TraceStore(Protocol):
    redactor: Redactor
    """Masks what every thread stores (the process's secrets); a thread's own secrets come
    with the records it hands over (`record_model_call`'s `redactor`) or were masked by its
    event log already."""

    recovered: list[str]
    """Turns of dead processes this store closed when it opened."""

    # threads
    def create_thread(self, thread: Thread, system_prompt: str) -> None: ...
    def update_thread(self, thread: Thread) -> None: ...
    def thread(self, thread_id: str) -> Thread | None: ...
    def system_prompt(self, thread_id: str) -> str: ...
    def list_threads(
        self, limit: int = 50, cursor: str | None = None, workspace: str | None = None
    ) -> tuple[list[Thread], str | None]: ...

    # the event log, and the turns and items it gives
    def append(
        self,
        event: Event,
        then: Callable[[], None] | None = None,
        failed: Callable[[TraceStoreError], None] | None = None,
    ) -> None:
        """Store one event and the state it changes, atomically. `then` runs once it is
        stored, `failed` instead if it could not be (both on the caller's event loop; a
        store may run them before returning). Without a running event loop, a failure may
        raise instead."""
        ...

    def last_seq(self, thread_id: str) -> int: ...
    def events(
        self, thread_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]: ...
    def items(self, thread_id: str) -> list[Item]: ...
    def last_turn_id(self, thread_id: str) -> str | None: ...
    def turns(self, thread_id: str) -> list[TurnWithItems]: ...
    def turn(self, turn_id: str) -> Turn | None: ...

    # model calls, outcomes, consent
    def record_model_call(self, call: ModelCallRecord, redactor: Redactor | None = None) -> None:
        """`redactor`: the thread's (its workspace's secrets too), else the store's."""
        ...

    def model_calls(self, thread_id: str) -> list[dict[str, Any]]:
        """Every model call of a thread in order, whole (kept parts filled in), the token
        layer as lists."""
        ...

    def record_outcome(self, outcome: Outcome) -> None: ...
    def outcomes(self, thread_id: str) -> list[Outcome]: ...
    def set_consent(self, workspace: str, allowed: bool) -> None: ...
    def consent(self, workspace: str) -> bool: ...

    # inline completions
    def record_completion(self, record: CompletionRecord) -> None: ...
    def record_completion_event(
        self, completion_id: str, kind: str, detail: dict[str, Any] | None = None
    ) -> bool: ...
    def completion(self, completion_id: str) -> CompletionRecord | None: ...
    def completions(self, limit: int = 50) -> list[CompletionRecord]: ...

    def flush(self) -> None:
        """Return once everything handed over so far is stored."""
        ...

    def close(self) -> None: ...
