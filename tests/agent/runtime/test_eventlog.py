"""Subscriptions to a thread's event log: stored then live, no gap, no repeat, bounded memory."""

import asyncio
from pathlib import Path

import pytest

from opencomposer.agent import eventlog
from opencomposer.agent.eventlog import ThreadLog
from opencomposer.agent.protocol.events import ItemDeltaEvent, ThreadStartedEvent
from opencomposer.agent.protocol.items import TextDelta
from opencomposer.agent.protocol.threads import Thread
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore


@pytest.fixture
def log(tmp_path: Path):
    store = SQLiteTraceStore(tmp_path / "traces.db")
    thread = Thread(id="thr_1", workspace=str(tmp_path))
    store.create_thread(thread, "system")
    log = ThreadLog(store, thread.id)
    log.emit(ThreadStartedEvent, thread=thread)
    yield log
    store.close()


def emit(log: ThreadLog, count: int) -> None:
    for n in range(count):
        log.emit(ItemDeltaEvent, turn_id="t", item_id="i", delta=TextDelta(text=str(n)))


async def take(subscription, count: int) -> list[int]:
    seqs = []
    async with asyncio.timeout(5):
        async for event in subscription:
            seqs.append(event.seq)
            if len(seqs) == count:
                return seqs
    return seqs


async def test_replay_then_live_without_gap_or_repeat(log: ThreadLog) -> None:
    emit(log, 4)  # seq 2..5 stored before anyone listens
    subscription = log.subscribe(after=2)
    emit(log, 3)  # seq 6..8 while subscribed
    assert await take(subscription, 6) == [3, 4, 5, 6, 7, 8]
    emit(log, 1)
    assert await take(subscription, 1) == [9]
    subscription.close()
    assert [e.seq for e in log.store.events("thr_1", after_seq=7)] == [8, 9]


async def test_a_slow_subscriber_catches_up_from_the_store(log: ThreadLog, monkeypatch) -> None:
    monkeypatch.setattr(eventlog, "QUEUE_LIMIT", 5)
    subscription = log.subscribe(after=1)
    emit(log, 1)
    assert await take(subscription, 1) == [2]  # caught up: delivery is live now
    emit(log, 50)  # far more than the queue holds, all while the subscriber is not reading
    assert len(subscription._queue) <= 5
    assert await take(subscription, 50) == list(range(3, 53))


async def test_approvers_are_counted_while_subscribed(log: ThreadLog) -> None:
    watcher = log.subscribe()
    approver = log.subscribe(answers_approvals=True)
    assert log.approvers() == 1
    approver.close()
    assert log.approvers() == 0
    watcher.close()
    assert await take(watcher, 1) == []  # a closed subscription ends its iteration
