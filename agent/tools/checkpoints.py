"""Checkpoints: the before- and after-image of every file the tools change, so the last edit,
a turn or a whole thread can be undone.

Independent of git on purpose: the workspace need not be a repository, and undo must never
touch the user's own index, stash or branches. Images are stored content-addressed (SHA-256)
beside a SQLite table of changes; a change is recorded before the file is written, so a crash
between the two leaves a record to recover from rather than a lost original.

Secret files (`.env`, `.env.*`) are recorded without their images: a checkpoint is a copy of
the file on disk, where masking would make undo write masked text back, and keeping the raw
text would put the secrets in the data folder. Their changes are listed (`unkept`,
`unrestorable`) so the tool result and undo can say that undo cannot put them back. Every
file here is private to the user (0600 in 0700 folders).
"""

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from opencomposer.agent.tools.secret_files import is_secret_file
from opencomposer.paths import private_database, private_dir, tighten_tree, write_private

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
    undone INTEGER NOT NULL DEFAULT 0,
    secret INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS changes_by_thread ON changes (workspace, thread_id, undone, id);
"""
# A checkpoints.db from before secret files were left out gains the column.
_ADD_SECRET = "ALTER TABLE changes ADD COLUMN secret INTEGER NOT NULL DEFAULT 0"


@dataclass(frozen=True)
class Change:
    path: Path
    before: bytes | None
    """Content before the call; None when the file did not exist."""

    after: bytes | None
    """Content after the call; None when the call deleted it."""

    secret: bool = False
    """Its images must not be kept though its path is no secret file (`.env` moved to
    another name). A secret file's own changes are found by their path."""


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
        loose = private_dir(folder)
        if private_dir(self._blobs) or loose:  # an older installation's images, 0644
            tighten_tree(folder)
        self._workspace = str(workspace_root)
        self._thread = thread_id
        self._lock = threading.Lock()
        private_database(folder / "checkpoints.db")
        self._db = sqlite3.connect(
            folder / "checkpoints.db", check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(changes)")}
        if "secret" not in columns:
            self._db.execute(_ADD_SECRET)

    def close(self) -> None:
        self._db.close()

    def record(self, call_id: str, turn_id: str | None, changes: Iterable[Change]) -> None:
        """Store the images and the change rows of one call, in one transaction; a secret
        file's row has no images."""
        rows = []
        for c in changes:
            secret = c.secret or is_secret_file(c.path)
            rows.append(
                (
                    self._workspace,
                    self._thread,
                    turn_id,
                    call_id,
                    str(c.path),
                    None if secret else self._store(c.before),
                    None if secret else self._store(c.after),
                    time.time(),
                    int(secret),
                )
            )
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO changes (workspace, thread_id, turn_id, call_id, path, "
                "before_hash, after_hash, created_at, secret) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._db.execute("COMMIT")

    def unkept(self, call_id: str) -> list[str]:
        """The secret files a call changed, whose images were not kept."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT path FROM changes WHERE workspace = ? AND thread_id = ? AND "
                "call_id = ? AND secret = 1 ORDER BY path",
                (self._workspace, self._thread, call_id),
            ).fetchall()
        return [row[0] for row in rows]

    def plan_undo(self, scope: UndoScope, turn_id: str | None = None) -> list[Restore]:
        """What undoing `scope` would restore: the last call (`edit`), a turn (the given one,
        else the latest), or everything the thread changed that is not undone yet. Secret
        files are left out (`unrestorable`)."""
        by_path: dict[str, list[tuple]] = {}
        for row in self._in_scope(scope, turn_id):
            if not row[6]:
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

    def unrestorable(
        self, scope: UndoScope, turn_id: str | None = None
    ) -> tuple[list[Path], list[int]]:
        """The secret files undoing `scope` would have to restore but cannot, and their
        change ids (to mark undone with the rest)."""
        rows = [row for row in self._in_scope(scope, turn_id) if row[6]]
        return [Path(p) for p in dict.fromkeys(row[3] for row in rows)], [r[0] for r in rows]

    def _in_scope(self, scope: UndoScope, turn_id: str | None) -> list[tuple]:
        rows = self._pending()
        if not rows:
            return []
        if scope == "edit":
            last_call = rows[-1][2]
            return [r for r in rows if r[2] == last_call]
        if scope == "turn":
            wanted = turn_id if turn_id is not None else rows[-1][1]
            return [r for r in rows if r[1] == wanted]
        return rows

    def mark_undone(self, change_ids: Iterable[int]) -> None:
        with self._lock:
            self._db.executemany(
                "UPDATE changes SET undone = 1 WHERE id = ?", [(i,) for i in change_ids]
            )

    def _pending(self) -> list[tuple]:
        """(id, turn_id, call_id, path, before_hash, after_hash, secret) not yet undone,
        oldest first."""
        with self._lock:
            return self._db.execute(
                "SELECT id, turn_id, call_id, path, before_hash, after_hash, secret FROM changes "
                "WHERE workspace = ? AND thread_id = ? AND undone = 0 ORDER BY id",
                (self._workspace, self._thread),
            ).fetchall()

    def _store(self, data: bytes | None) -> str | None:
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        blob = self._blobs / digest[:2] / digest
        if not blob.exists():
            private_dir(blob.parent)
            write_private(blob, data)
        return digest

    def _load(self, digest: str | None) -> bytes | None:
        return None if digest is None else (self._blobs / digest[:2] / digest).read_bytes()
