"""A thread's event log: redacts each event, numbers it, stores it, then hands it to
subscribers.

Redaction happens here, once, with the thread's redactor: the one redacted event is what the
store keeps, what every subscriber (SSE, LSP, the CLI, a web page) receives and what the
session keeps in memory, so no path out of the process sees text the store would not.
Streamed text goes through a `StreamRedactor` per open item and stream, so a secret split
across deltas is never sent in pieces; what it holds back goes out as a last delta just
before the item completes. The workspace's secret files are re-read (throttled) before each
event, and what a tool call that may write one holds is learnt before the call is announced.

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
from opencomposer.redact import Redactor, StreamRedactor

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
        self._streams: dict[tuple[str, str], tuple[str, ItemDelta, StreamRedactor]] = {}
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
        """Stream more of an item: what can safely go out now goes out as a delta."""
        self._refresh()
        key = (item_id, getattr(delta, "stream", delta.kind))
        if key not in self._streams:
            self._streams[key] = (turn_id, delta, StreamRedactor(self.redactor))
        text = self._streams[key][2].push(delta.text)
        if text:
            self._publish_delta(turn_id, item_id, delta, text)

    def _flush(self, item_id: str) -> None:
        for key in [key for key in self._streams if key[0] == item_id]:
            turn_id, delta, stream = self._streams.pop(key)
            text = stream.flush()
            if text:
                self._publish_delta(turn_id, item_id, delta, text)

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
