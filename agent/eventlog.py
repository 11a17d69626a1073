"""A thread's event log: numbers each event, stores it, then hands it to subscribers.

Storing comes first, so a client never sees an event the store does not have. A subscriber
first replays the stored events after the `seq` it names, then receives live ones, with no
gap and no repeat between the two (both happen on the event loop without an await in
between). A subscriber that falls behind does not hold memory: once its queue is full it
reads the rest from the store, then goes back to live delivery.
"""

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from opencomposer.agent.protocol.events import Event
from opencomposer.agent.traces.store import TraceStore

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
        self._queue: deque[Event] = deque()
        self._lagging = True  # start by reading what is stored
        self._wakeup = asyncio.Event()
        self._closed = False

    def _offer(self, event: Event) -> None:
        if self._lagging:
            self._wakeup.set()
        elif len(self._queue) >= QUEUE_LIMIT:
            self._queue.clear()
            self._lagging = True
        else:
            self._queue.append(event)
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
    def __init__(self, store: TraceStore, thread_id: str) -> None:
        self.store = store
        self.thread_id = thread_id
        self._seq = store.last_seq(thread_id)
        self._subscribers: list[Subscription] = []
        self.on_unsubscribe: Callable[[], None] | None = None

    @property
    def seq(self) -> int:
        return self._seq

    def emit(self, kind: type[Event], **fields: Any) -> Event:  # type: ignore[valid-type]
        event = kind(seq=self._seq + 1, thread_id=self.thread_id, **fields)
        self.store.append(event)
        self._seq = event.seq
        for subscriber in list(self._subscribers):
            subscriber._offer(event)
        return event

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
