"""Checkpoints: the before- and after-image of every file the tools change, so the last edit,
a turn or a whole thread can be undone.

Independent of git on purpose: the workspace need not be a repository, and undo must never
touch the user's own index, stash or branches. Images are stored content-addressed (SHA-256)
beside a SQLite table of changes; a change is recorded before the file is written, so a crash
between the two leaves a record to recover from rather than a lost original.
"""

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

UndoScope = Literal["edit", "turn", "thread"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY,
    workspace TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    turn_id TEXT,
    call_id TEXT NOT NULL,
    path TEXT NOT NULL,
    before_hash TEXT,
    after_hash TEXT,
    created_at REAL NOT NULL,
    undone INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS changes_by_thread ON changes (workspace, thread_id, undone, id);
"""


@dataclass(frozen=True)
class Change:
    path: Path
    before: bytes | None
    """Content before the call; None when the file did not exist."""

    after: bytes | None
    """Content after the call; None when the call deleted it."""


@dataclass(frozen=True)
class Restore:
    """One file to put back: `expected` is what it should hold now (the last recorded
    after-image); anything else means someone changed it since."""

    path: Path
    expected: bytes | None
    restore: bytes | None
    change_ids: tuple[int, ...]


class CheckpointStore:
    def __init__(self, folder: Path, workspace_root: Path, thread_id: str) -> None:
        self._blobs = folder / "blobs"
        self._blobs.mkdir(parents=True, exist_ok=True)
        self._workspace = str(workspace_root)
        self._thread = thread_id
        self._lock = threading.Lock()
        self._db = sqlite3.connect(folder / "checkpoints.db", check_same_thread=False,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def record(self, call_id: str, turn_id: str | None, changes: Iterable[Change]) -> None:
        """Store the images and the change rows of one call, in one transaction."""
        rows = [
            (self._workspace, self._thread, turn_id, call_id, str(c.path),
             self._store(c.before), self._store(c.after), time.time())
            for c in changes
        ]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO changes (workspace, thread_id, turn_id, call_id, path, "
                "before_hash, after_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def plan_undo(self, scope: UndoScope, turn_id: str | None = None) -> list[Restore]:
        """What undoing `scope` would restore: the last call (`edit`), a turn (the given one,
        else the latest), or everything the thread changed that is not undone yet."""
        rows = self._pending()
        if not rows:
            return []
        if scope == "edit":
            last_call = rows[-1][2]
            rows = [r for r in rows if r[2] == last_call]
        elif scope == "turn":
            wanted = turn_id if turn_id is not None else rows[-1][1]
            rows = [r for r in rows if r[1] == wanted]
        by_path: dict[str, list[tuple]] = {}
        for row in rows:
            by_path.setdefault(row[3], []).append(row)
        return [
            Restore(
                path=Path(path),
                expected=self._load(changes[-1][5]),
                restore=self._load(changes[0][4]),
                change_ids=tuple(r[0] for r in changes),
            )
            for path, changes in by_path.items()
        ]

    def mark_undone(self, change_ids: Iterable[int]) -> None:
        with self._lock:
            self._db.executemany("UPDATE changes SET undone = 1 WHERE id = ?",
                                 [(i,) for i in change_ids])

    def _pending(self) -> list[tuple]:
        """(id, turn_id, call_id, path, before_hash, after_hash) not yet undone, oldest first."""
        with self._lock:
            return self._db.execute(
                "SELECT id, turn_id, call_id, path, before_hash, after_hash FROM changes "
                "WHERE workspace = ? AND thread_id = ? AND undone = 0 ORDER BY id",
                (self._workspace, self._thread),
            ).fetchall()

    def _store(self, data: bytes | None) -> str | None:
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        blob = self._blobs / digest[:2] / digest
        if not blob.exists():
            blob.parent.mkdir(exist_ok=True)
            tmp = blob.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(blob)
        return digest

    def _load(self, digest: str | None) -> bytes | None:
        return None if digest is None else (self._blobs / digest[:2] / digest).read_bytes()
