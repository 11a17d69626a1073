"""The SQLite store's writes, off the event loop and many to a transaction.

A commit costs a WAL write each time (a fifth of a millisecond here), and a model step emits a
dozen events: committing each on the event loop stalled every thread's streaming behind the
disk. Writes are queued instead, and a thread of their own commits whatever is queued at once
in one transaction. Each write's `then` runs after its transaction commits, on the event loop
that queued it, so what a subscriber is told is on disk first, as before.

Called with no event loop running (a CLI command, a script, a test), a write is committed
before the call returns: there is nothing to hand `then` to later.

A write that fails (a constraint it breaks) is undone alone, and its `failed` runs instead of
its `then`; a transaction that cannot commit (disk full, an I/O error) fails every write in it
that way. So no client is told of an event the store does not have, and the one that handed
it over learns why (`eventlog.ThreadLog` fails its thread's next event with it). A full file
system fails the transaction whole, as `TraceStoreFull` naming the folder: SQLite may already
have rolled it back, so there is no savepoint left to retry single writes under.
"""

import asyncio
import contextlib
import functools
import logging
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from opencomposer.agent.traces.base import TraceStoreError, TraceStoreFull
from opencomposer.data_folder import is_full

Write = Callable[[sqlite3.Connection], None]
"""One change, run inside the writer's transaction."""

Done = Callable[[], None]
Failed = Callable[[TraceStoreError], None]
log = logging.getLogger(__name__)

_Queued = tuple[Write, Done | None, Failed | None, asyncio.AbstractEventLoop]


class BatchWriter:
    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        """`path`: the database's file, whose folder a full file system is reported by."""
        self._db = db
        self._folder = path.parent
        self.lock = threading.Lock()
        """Held while the connection is in use: by a batch, or by a reader."""

        self._queue: deque[_Queued] = deque()
        self._changed = threading.Condition()
        self._submitted = 0
        self._settled = 0  # writes committed or failed
        self._closing = False
        self._thread = threading.Thread(
            target=self._run, name=f"trace-writer {path.name}", daemon=True
        )
        self._thread.start()

    def submit(self, write: Write, then: Done | None = None, failed: Failed | None = None) -> None:
        """Queue `write`; `then` or `failed` runs on this event loop once it is settled. With
        no event loop running, it is committed now, and a failure raises."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._now(write)
            if then is not None:
                then()
            return
        with self._changed:
            if self._closing:
                raise TraceStoreError("the trace store is closed")
            self._queue.append((write, then, failed, loop))
            self._submitted += 1
            self._changed.notify_all()

    def _now(self, write: Write) -> None:
        """Commit what is queued, then `write` in a transaction of its own."""
        self.flush()
        with self.lock:
            try:
                with self._db:
                    write(self._db)
            except Exception as exc:
                raise self._failure(exc) from exc

    def flush(self) -> None:
        """Return once every write queued so far is settled."""
        with self._changed:
            target = self._submitted
            while self._settled < target:
                self._changed.wait()

    def close(self) -> None:
        """Commit what is queued and stop the thread."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._closing:
                    self._changed.wait()
                if not self._queue:
                    return  # closing, and nothing left
                batch = list(self._queue)
                self._queue.clear()
            failures = self._commit(batch)
            with self._changed:
                self._settled += len(batch)
                self._changed.notify_all()
            for (_, then, failed, loop), failure in zip(batch, failures, strict=True):
                call: Callable[[], None] | None = then
                if failure is not None:
                    call = functools.partial(failed or _log_failure, failure)
                # A loop closed meanwhile has nobody left to tell.
                if call is not None and not loop.is_closed():
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(call)

    def _commit(self, batch: list[_Queued]) -> list[TraceStoreError | None]:
        """Run the batch in one transaction. Should a write fail, the batch is run again with
        each write under a savepoint of its own, so that only the failing ones are undone (a
        savepoint per write always would cost two statements per event)."""
        writes = [write for write, *_ in batch]
        with self.lock:
            try:
                try:
                    return self._transaction(writes, isolated=False)
                except _WriteFailed:
                    return self._transaction(writes, isolated=True)
            except sqlite3.Error as exc:  # the transaction itself (disk full, I/O)
                return [self._failure(exc)] * len(batch)

    def _transaction(self, writes: list[Write], *, isolated: bool) -> list[TraceStoreError | None]:
        failures: list[TraceStoreError | None] = []
        try:
            self._db.execute("BEGIN")
            for write in writes:
                if isolated:
                    self._db.execute("SAVEPOINT write")
                try:
                    write(self._db)
                except Exception as exc:  # whatever it was, this write did not happen
                    if is_full(exc):
                        raise  # the transaction's failure, not this write's
                    if not isolated:
                        raise _WriteFailed from exc
                    self._db.execute("ROLLBACK TO write")
                    failures.append(self._failure(exc))
                else:
                    failures.append(None)
                if isolated:
                    self._db.execute("RELEASE write")
            self._db.commit()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._db.rollback()
            raise
        return failures

    def _failure(self, exc: Exception) -> TraceStoreError:
        if is_full(exc):
            return TraceStoreFull(self._folder, f"the trace store could not write: {exc}")
        return TraceStoreError(f"the trace store could not write: {exc}")


class _WriteFailed(Exception):
    """A write of a batch run without savepoints failed: run it again with them."""


def _log_failure(failure: TraceStoreError) -> None:
    """For a write whose caller has nobody to tell (a model call's record, an outcome)."""
    log.error("%s", failure)
