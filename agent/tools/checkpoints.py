"""Checkpoints: the before- and after-image of every file the tools change, so the last edit,
a turn or a whole thread can be undone.

Independent of git on purpose: the workspace need not be a repository, and undo must never
touch the user's own index, stash or branches. Images are stored content-addressed (SHA-256)
beside a SQLite table of changes; a change is recorded before the file is written, so a crash
between the two leaves a record to recover from rather than a lost original.

Some changes are recorded without their images, with the reason (`unkept`): secret files
(`.env`, `.env.*`), where a checkpoint is a copy of the file on disk, masking would make undo
write masked text back, and the raw text would put the secrets in the data folder; and files
larger than `max_image_bytes` (by apparent size: a command makes a terabyte-long sparse file
for free, and a dense copy per tool call would fill the data folder). The callers never read
such a file whole either (`Workspace.current_bytes` gives its size alone). The tool result and
undo say that undo cannot put these back.

A full data folder fails a record whole (`DataFolderFull`): its transaction is rolled back
and the images it wrote are removed, so nothing is left half-recorded. Every file here is
private to the user (0600 in 0700 folders).
"""

import contextlib
import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from opencomposer.agent.tools.secret_files import is_secret_file
from opencomposer.agent.tools.workspace import Image, Oversized
from opencomposer.data_folder import full, is_full
from opencomposer.paths import private_database, private_dir, tighten_tree, write_private

UndoScope = Literal["edit", "turn", "thread"]

# 16 MiB: any source file, generated code and lock files included; what is larger is data
# a tool call is unlikely to need undone and the data folder should not keep one copy per
# change of (`tools.checkpoint_max_bytes` sets it).
DEFAULT_MAX_IMAGE_BYTES = 16 * 1024 * 1024
SECRET = "a secret file: never kept in checkpoints"

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
    unkept TEXT
);
CREATE INDEX IF NOT EXISTS changes_by_thread ON changes (workspace, thread_id, undone, id);
"""
# A checkpoints.db from before images could be left out for a reason gains the column; one
# from when only secret files were (a `secret` flag) keeps them left out.
_ADD_UNKEPT = "ALTER TABLE changes ADD COLUMN unkept TEXT"
_FROM_SECRET = "UPDATE changes SET unkept = ? WHERE secret = 1"


@dataclass(frozen=True)
class Change:
    path: Path
    before: Image
    """Content before the call; None when the file did not exist."""

    after: Image
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
    def __init__(
        self,
        folder: Path,
        workspace_root: Path,
        thread_id: str,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    ) -> None:
        """`folder`: the checkpoints' folder in the data folder. DataFolderFull when that
        has no room even to open the database."""
        self._blobs = folder / "blobs"
        self._data_folder = folder.parent
        self._workspace = str(workspace_root)
        self._thread = thread_id
        self._limit = max_image_bytes
        self._lock = threading.Lock()
        with self._full_is_typed():
            loose = private_dir(folder)
            if private_dir(self._blobs) or loose:  # an older installation's images, 0644
                tighten_tree(folder)
            private_database(folder / "checkpoints.db")
            self._db = sqlite3.connect(
                folder / "checkpoints.db", check_same_thread=False, isolation_level=None
            )
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(changes)")}
                if "unkept" not in columns:
                    self._db.execute(_ADD_UNKEPT)
                    if "secret" in columns:
                        self._db.execute(_FROM_SECRET, (SECRET,))
            except BaseException:
                self._db.close()
                raise

    def close(self) -> None:
        self._db.close()

    def record(self, call_id: str, turn_id: str | None, changes: Iterable[Change]) -> None:
        """Store the images and the change rows of one call, in one transaction; a change
        whose images are not kept has none, and says why. All or nothing: DataFolderFull
        when the data folder has no room."""
        written: list[Path] = []
        with self._full_is_typed(), self._undone_on_failure(written):
            rows = []
            for c in changes:
                why = self._unkept(c)
                rows.append(
                    (
                        self._workspace,
                        self._thread,
                        turn_id,
                        call_id,
                        str(c.path),
                        None if why else self._store(c.before, written),
                        None if why else self._store(c.after, written),
                        time.time(),
                        why,
                    )
                )
            with self._lock:
                self._db.execute("BEGIN")
                try:
                    self._db.executemany(
                        "INSERT INTO changes (workspace, thread_id, turn_id, call_id, path, "
                        "before_hash, after_hash, created_at, unkept) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        rows,
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                    raise

    def _unkept(self, change: Change) -> str | None:
        """Why the change's images are not kept, or None when they are."""
        if change.secret or is_secret_file(change.path):
            return SECRET
        size = max(_size(change.before), _size(change.after))
        if size > self._limit:
            return f"{_human(size)}, over the {_human(self._limit)} kept for undo"
        if isinstance(change.before, Oversized) or isinstance(change.after, Oversized):
            return f"{_human(size)}, too large to be read for undo"
        return None

    def unkept(self, call_id: str) -> list[tuple[str, str]]:
        """The files a call changed whose images were not kept, and why."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path, MIN(unkept) FROM changes WHERE workspace = ? AND thread_id = ? "
                "AND call_id = ? AND unkept IS NOT NULL GROUP BY path ORDER BY path",
                (self._workspace, self._thread, call_id),
            ).fetchall()
        return [(row[0], row[1]) for row in rows]

    def plan_undo(self, scope: UndoScope, turn_id: str | None = None) -> list[Restore]:
        """What undoing `scope` would restore: the last call (`edit`), a turn (the given one,
        else the latest), or everything the thread changed that is not undone yet. Files
        whose images were not kept are left out (`unrestorable`)."""
        by_path: dict[str, list[tuple]] = {}
        for row in self._in_scope(scope, turn_id):
            if row[6] is None:
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
        """The files undoing `scope` would have to restore but cannot (their images were not
        kept), and their change ids (to mark undone with the rest)."""
        rows = [row for row in self._in_scope(scope, turn_id) if row[6] is not None]
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
        """DataFolderFull when the data folder has no room for the change."""
        with self._full_is_typed(), self._lock:
            self._db.executemany(
                "UPDATE changes SET undone = 1 WHERE id = ?", [(i,) for i in change_ids]
            )

    def _pending(self) -> list[tuple]:
        """(id, turn_id, call_id, path, before_hash, after_hash, unkept) not yet undone,
        oldest first."""
        with self._lock:
            return self._db.execute(
                "SELECT id, turn_id, call_id, path, before_hash, after_hash, unkept FROM changes "
                "WHERE workspace = ? AND thread_id = ? AND undone = 0 ORDER BY id",
                (self._workspace, self._thread),
            ).fetchall()

    def _store(self, data: Image, written: list[Path]) -> str | None:
        """The image's digest, its blob written unless one exists (added to `written`)."""
        if data is None:
            return None
        assert isinstance(data, bytes), "an oversized image is never kept"
        digest = hashlib.sha256(data).hexdigest()
        blob = self._blobs / digest[:2] / digest
        if not blob.exists():
            private_dir(blob.parent)
            write_private(blob, data)
            written.append(blob)
        return digest

    def _load(self, digest: str | None) -> bytes | None:
        return None if digest is None else (self._blobs / digest[:2] / digest).read_bytes()

    @contextlib.contextmanager
    def _full_is_typed(self) -> Iterator[None]:
        """A full file system (an OSError or SQLite's) raised as the data folder's error."""
        try:
            yield
        except (OSError, sqlite3.Error) as exc:
            if is_full(exc):
                raise full(self._data_folder, exc) from exc
            raise

    @contextlib.contextmanager
    def _undone_on_failure(self, written: list[Path]) -> Iterator[None]:
        """Remove the images a record wrote when it fails: its rows were never committed."""
        try:
            yield
        except BaseException:
            for blob in written:
                blob.unlink(missing_ok=True)
            raise


def _size(image: Image) -> int:
    if isinstance(image, Oversized):
        return image.size
    return 0 if image is None else len(image)


def _human(size: int) -> str:
    """A byte count as people read it: 900 bytes, 16 MiB, 1.5 TiB."""
    if size < 1024:
        return f"{size:,} bytes"
    value, units = size / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.1f}".removesuffix(".0") + f" {units[0]}"
