"""A thread's event log: redacts each event, numbers it, stores it, then hands it to
subscribers.

Redaction happens here, once, with the thread's redactor: the one redacted event is what the
store keeps, what every subscriber (SSE, LSP, the CLI, a web page) receives and what the
session keeps in memory, so no path out of the process sees text the store would not.
Streamed text goes through one stream redaction per open item, its streams (a command's
stdout and stderr) together in arrival order, so a secret split across deltas, or between the
streams, is never sent in pieces, however long the pauses between them; what it holds back
goes out as a last delta just before the item completes. The workspace's secret files are
re-read (throttled) before each event, and what a tool call that may write one holds is learnt
before the call is announced.

Storing comes first, so a client never sees an event the store does not have: the log numbers
an event and hands it to the store, and subscribers are told of it when the store says it is
stored (the SQLite store commits off the event loop, so that is a moment later; events are
told in order). A subscriber first replays the stored events after the `seq` it names, then
receives live ones, with no gap and no repeat between the two: it skips a live event it has
already read from the store. A subscriber that falls behind does not hold memory: once its
queue is full it reads the rest from the store, then goes back to live delivery.
"""

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from opencomposer.agent.protocol.common import ActionClass
from opencomposer.agent.protocol.events import (
    Event,
    ItemCompletedEvent,
    ItemDeltaEvent,
    ItemStartedEvent,
)
from opencomposer.agent.protocol.items import ItemDelta, ToolCallFields
from opencomposer.agent.tools.harness_protocol import SecretWatch
from opencomposer.agent.traces.base import EventStore, TraceStoreError
from opencomposer.redact import Redactor, SourcedStreamRedactor

# Live events a subscriber may have unread before it switches to reading from the store.
QUEUE_LIMIT = 4096
# Events read from the store per query while a subscriber catches up.
CATCH_UP_BATCH = 1000


class Subscription:
    """Events with `seq` > `after`, stored then live, in order; iterate until `close()`."""

    def __init__(self, log: "ThreadLog", after: int, answers_approvals: bool) -> None:
        self._log = log
        self.answers_approvals = answers_approvals
        """This subscriber (a client) will answer approval requests it receives."""

        self._last = after
        self._seen = after  # the last event queued or read
        self._queue: deque[Event] = deque()
        self._lagging = True  # start by reading what is stored
        self._wakeup = asyncio.Event()
        self._closed = False

    def _offer(self, event: Event) -> None:
        if self._lagging:
            self._wakeup.set()
        elif event.seq <= self._seen:
            return  # read from the store before the store's word that it was stored came
        elif len(self._queue) >= QUEUE_LIMIT:
            self._queue.clear()
            self._lagging = True
        else:
            self._queue.append(event)
            self._seen = event.seq
        self._wakeup.set()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        while not self._closed:
            if self._queue:
                event = self._queue.popleft()
                self._last = event.seq
                return event
            if self._lagging:
                stored = self._log.store.events(self._log.thread_id, self._last, CATCH_UP_BATCH)
                if stored:
                    self._queue.extend(stored)
                    self._seen = stored[-1].seq
                    continue
                self._lagging = False  # caught up: the next event arrives live
            self._wakeup.clear()
            await self._wakeup.wait()
        raise StopAsyncIteration

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._wakeup.set()
            self._log._unsubscribe(self)


class _ItemStream:
    """An open item's streamed text on its way out."""

    def __init__(self, turn_id: str, redactor: Redactor) -> None:
        self.turn_id = turn_id
        self.redaction = SourcedStreamRedactor(redactor)
        self.deltas: dict[str, ItemDelta] = {}
        """The last delta of each of its streams, the shape of what goes out for it."""


class ThreadLog:
    def __init__(
        self,
        store: EventStore,
        thread_id: str,
        redactor: Redactor | None = None,
        secret_files: SecretWatch | None = None,
    ) -> None:
        self.store = store
        self.thread_id = thread_id
        self.redactor = redactor or Redactor()
        self.secret_files = secret_files
        self._seq = store.last_seq(thread_id)
        self._subscribers: list[Subscription] = []
        self._streams: dict[str, _ItemStream] = {}
        self._failure: TraceStoreError | None = None
        self.on_unsubscribe: Callable[[], None] | None = None

    @property
    def seq(self) -> int:
        return self._seq

    def emit(self, kind: type[Event], **fields: Any) -> Event:
        """Redact, store and publish one event. Completing an item first sends what its
        streams still hold."""
        self._refresh()
        item = fields.get("item")
        if kind is ItemCompletedEvent and item is not None:
            self._flush(item.id)
        if (
            kind is ItemStartedEvent
            and isinstance(item, ToolCallFields)
            and item.action_class != ActionClass.read_only
            and self.secret_files is not None
        ):
            self.secret_files.note_call([item.arguments, item.arguments_text])
        event = kind(seq=self._seq + 1, thread_id=self.thread_id, **fields)
        return self._publish(self.redactor.redact_data(event))

    def stream(self, turn_id: str, item_id: str, delta: ItemDelta) -> None:
        """Stream more of an item: what can safely go out now goes out as deltas."""
        self._refresh()
        stream = self._streams.get(item_id)
        if stream is None:
            stream = self._streams[item_id] = _ItemStream(turn_id, self.redactor)
        source = getattr(delta, "stream", delta.kind)
        stream.deltas[source] = delta
        self._publish_deltas(stream, item_id, stream.redaction.push(source, delta.text))

    def _flush(self, item_id: str) -> None:
        stream = self._streams.pop(item_id, None)
        if stream is not None:
            self._publish_deltas(stream, item_id, stream.redaction.flush())

    def _publish_deltas(
        self, stream: _ItemStream, item_id: str, parts: list[tuple[str, str]]
    ) -> None:
        for source, text in parts:
            self._publish_delta(stream.turn_id, item_id, stream.deltas[source], text)

    def _publish_delta(self, turn_id: str, item_id: str, delta: ItemDelta, text: str) -> None:
        self._publish(
            ItemDeltaEvent(
                seq=self._seq + 1,
                thread_id=self.thread_id,
                turn_id=turn_id,
                item_id=item_id,
                delta=delta.model_copy(update={"text": text}),
            )
        )

    def _publish(self, event: Event) -> Event:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure  # once: the turn can still log how it ended
        self.store.append(event, then=lambda: self._tell(event), failed=self._store_failed)
        self._seq = event.seq
        return event

    def _store_failed(self, failure: TraceStoreError) -> None:
        """An event was not stored (so nobody was told of it): the thread's next one fails
        with the reason."""
        self._failure = failure

    def _tell(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            subscriber._offer(event)

    def _refresh(self) -> None:
        if self.secret_files is not None:
            self.secret_files.refresh()

    def subscribe(self, after: int = 0, *, answers_approvals: bool = False) -> Subscription:
        subscription = Subscription(self, after, answers_approvals)
        self._subscribers.append(subscription)
        return subscription

    def approvers(self) -> int:
        """Subscribers that can answer approval requests right now."""
        return sum(s.answers_approvals for s in self._subscribers)

    def _unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)
            if self.on_unsubscribe is not None:
                self.on_unsubscribe()

    def close(self) -> None:
        for subscriber in list(self._subscribers):
            subscriber.close()
