"""The SQLite store's writes off the event loop: nobody is told of an event before it is on
disk, a reader sees every write made before it asked, one bad write fails alone and its
thread learns why, and closing commits what is queued."""

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from opencomposer.agent.eventlog import ThreadLog
from opencomposer.agent.protocol.events import (
    ItemCompletedEvent,
    ThreadStartedEvent,
    TurnStartedEvent,
)
from opencomposer.agent.protocol.items import AgentMessageItem, ItemStatus
from opencomposer.agent.protocol.threads import Thread, Turn
from opencomposer.agent.traces.base import TraceStoreError
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def open_store(tmp_path: Path) -> tuple[SQLiteTraceStore, Thread]:
    store = SQLiteTraceStore(tmp_path / "traces.db")
    thread = Thread(id="thr_1", workspace="/w", created_at=T0, updated_at=T0)
    store.create_thread(thread, "system")
    store.append(ThreadStartedEvent(seq=1, thread_id="thr_1", at=T0, thread=thread))
    return store, thread


def message(seq: int) -> ItemCompletedEvent:
    item = AgentMessageItem(
        id=f"item_{seq}", turn_id="turn_1", text=f"text {seq}", status=ItemStatus.completed
    )
    return ItemCompletedEvent(seq=seq, thread_id="thr_1", at=T0, item=item)


def on_disk(path: Path) -> set[int]:
    """The events another connection (another process) sees committed."""
    with sqlite3.connect(path) as db:
        return {seq for (seq,) in db.execute("SELECT seq FROM events WHERE thread_id = 'thr_1'")}


async def test_an_event_is_told_only_once_it_is_committed(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    told: list[tuple[int, bool]] = []

    def tell(seq: int) -> None:
        told.append((seq, seq in on_disk(store.path)))

    for seq in range(2, 202):
        store.append(message(seq), then=lambda seq=seq: tell(seq))
    assert told == []  # handed over: subscribers hear of it once the writer has written it
    store.flush()
    for _ in range(100):
        if len(told) == 200:
            break
        await asyncio.sleep(0.01)
    assert [seq for seq, _ in told] == list(range(2, 202))  # in order
    assert all(committed for _, committed in told)
    store.close()


async def test_a_reader_sees_every_write_made_before_it_asked(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    for seq in range(2, 52):
        store.append(message(seq))
    # No await in between: the writes may still be queued, and the read waits for them.
    assert [event.seq for event in store.events("thr_1")] == list(range(1, 52))
    assert len(store.items("thr_1")) == 50
    store.close()


async def test_a_bad_write_fails_alone_and_its_thread_learns_why(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    log = ThreadLog(store, "thr_1")
    subscription = log.subscribe(after=1)
    # A turn of a thread that does not exist breaks a foreign key.
    orphan = Turn(id="turn_x", thread_id="thr_missing", started_at=T0)
    log.emit(TurnStartedEvent, turn=orphan)
    good = AgentMessageItem(id="item_9", turn_id="turn_1", text="fine", status=ItemStatus.completed)
    log.emit(ItemCompletedEvent, item=good)
    store.flush()
    await asyncio.sleep(0.05)  # the writer's word reaches the event loop
    assert on_disk(store.path) == {1, 3}  # the good event, written in the same batch
    with pytest.raises(TraceStoreError, match="FOREIGN KEY"):
        log.emit(ItemCompletedEvent, item=good)
    log.emit(ItemCompletedEvent, item=good)  # said once: the thread can log how it ended
    received = await asyncio.wait_for(anext(subscription), 5)
    assert received.seq == 3  # the failed event was never told
    subscription.close()
    store.close()


async def test_closing_commits_what_is_queued(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    for seq in range(2, 102):
        store.append(message(seq))
    store.close()
    assert on_disk(tmp_path / "traces.db") == set(range(1, 102))
    with pytest.raises(TraceStoreError, match="closed"):
        store.append(message(500))
