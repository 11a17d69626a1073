"""A thread's events on their way to the trace store, held in order while its folder is full.

The event log tells a subscriber of an event only once the store has it. A full data folder
breaks that promise's other half: the events that end the running turn can no longer be
stored, so its clients would wait for them forever. The backlog stands between a thread's
`ThreadLog` and the store. It passes everything through until the store fails with
`TraceStoreFull`; from then on it hands the store nothing more (what is already on its way
settles first, so nothing is stored out of order), tells each event to the subscribers as it
comes, in order, and keeps it in memory, where a subscriber that catches up reads it too.
`on_full` hears of it once, so that the session can end the running turn.

`retry()` hands events to the store again, and `settled()` says whether it took them. The
held events themselves are never stored afterwards (the store may have kept some that came
after them); the session stores the final state of what they changed instead.
"""

import asyncio
import bisect
import functools
from collections.abc import Callable

from opencomposer.agent.protocol.events import Event
from opencomposer.agent.traces.base import TraceStore, TraceStoreError, TraceStoreFull

Done = Callable[[], None]
Failed = Callable[[TraceStoreError], None]


class EventBacklog:
    """The part of a `TraceStore` a `ThreadLog` and its subscriptions use (`append`,
    `events`, `last_seq`), over `store`, for one thread."""

    def __init__(self, store: TraceStore, on_full: Callable[[TraceStoreFull], None]) -> None:
        self.store = store
        self._on_full = on_full
        self.failure: TraceStoreFull | None = None
        """Set from the store's first full-folder failure until a retry is stored whole."""

        self._held: list[Event] = []  # told to subscribers, not stored; in seq order
        self._waiting: list[Done] = []  # held events to tell once those on their way settle
        self._on_the_way = 0
        self._retrying = False
        self._retry_failure: TraceStoreFull | None = None
        self._settled = asyncio.Event()
        self._settled.set()

    # ------------------------------------------------------------------ the store's part

    def append(self, event: Event, then: Done | None = None, failed: Failed | None = None) -> None:
        if self.failure is not None and (not self._retrying or self._retry_failure is not None):
            self._hold(event, then)
            return
        self._on_the_way += 1
        self._settled.clear()
        try:
            self.store.append(
                event,
                then=functools.partial(self._stored, then),
                failed=functools.partial(self._refused, event, then, failed),
            )
        except TraceStoreFull as failure:  # a store that writes before it returns
            self._refused(event, then, failed, failure)

    def events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """Stored events after `after_seq`, with the held ones among them."""
        stored = self.store.events(thread_id, after_seq, limit)
        if not self._held:
            return stored
        by_seq = {event.seq: event for event in stored}
        by_seq.update((event.seq, event) for event in self._held if event.seq > after_seq)
        merged = [by_seq[seq] for seq in sorted(by_seq)]
        return merged if limit is None else merged[:limit]

    def last_seq(self, thread_id: str) -> int:
        stored = self.store.last_seq(thread_id)
        return max(stored, self._held[-1].seq) if self._held else stored

    # ------------------------------------------------------------------ after a failure

    def retry(self) -> None:
        """Hand events to the store again; `settled()` says whether it kept them."""
        self._retrying = True
        self._retry_failure = None

    async def settled(self) -> None:
        """Once every event handed to the store has settled. After `retry()`: the held
        events are dropped if the store kept everything since, else TraceStoreFull."""
        await self._settled.wait()
        if not self._retrying:
            return
        self._retrying = False
        if self._retry_failure is not None:
            raise self._retry_failure
        self.failure = None
        self._held.clear()

    # ------------------------------------------------------------------ settling

    def _stored(self, then: Done | None) -> None:
        # Settled in the order they were handed over: anything held before it was told.
        if then is not None:
            then()
        self._settle()

    def _refused(
        self, event: Event, then: Done | None, failed: Failed | None, failure: TraceStoreError
    ) -> None:
        if not isinstance(failure, TraceStoreFull):  # this write's own fault (a constraint)
            if failed is not None:
                failed(failure)
            self._settle()
            return
        if self._retrying:
            self._retry_failure = failure
        first = self.failure is None
        self.failure = self.failure or failure
        bisect.insort(self._held, event, key=_seq)
        if then is not None:
            then()
        self._settle()
        if first:
            self._on_full(failure)

    def _hold(self, event: Event, then: Done | None) -> None:
        bisect.insort(self._held, event, key=_seq)
        if then is not None:
            self._waiting.append(then)
        if not self._on_the_way:
            self._tell_waiting()

    def _settle(self) -> None:
        self._on_the_way -= 1
        if not self._on_the_way:
            self._tell_waiting()
            self._settled.set()

    def _tell_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        for then in waiting:
            then()


def _seq(event: Event) -> int:
    return event.seq
