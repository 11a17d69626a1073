"""The workspace's chunks and their embeddings, kept in SQLite and searched in memory.

`update()` is incremental: a file whose size and mtime match the last look is trusted (unless
that mtime was within `_RACY_NS` of the look, as git does, since a quick second write can
keep the mtime); anything else is hashed, and only files whose content hash changed are
re-chunked and re-embedded. Each group of files is written in one transaction, so a crash
leaves every file either fully old or fully new, and work done before the crash is kept.
Embeddings are stored as float16: half the size of float32 (768 bytes a chunk), and the
rounding moves a cosine score by at most 4e-5 (measured), far below the gaps between ranked
hits. Search is a matrix-vector product over every chunk's unit vector (cosine similarity).
Without an embedding model the same chunks are ranked by BM25 and the outcome says why.
"""

import hashlib
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from opencomposer.agent.tools.beneath import Tree
from opencomposer.agent.tools.code_index.chunking import Chunk, chunk_file, embedding_input
from opencomposer.agent.tools.code_index.embedder import MiniLMEmbedder
from opencomposer.agent.tools.code_index.lexical import BM25Index
from opencomposer.agent.tools.errors import Denied
from opencomposer.paths import private_database

MAX_FILE_BYTES = 1 << 20
"""Larger files are generated code, data or logs: not worth a search hit."""

INDEX_FORMAT = "1"
"""Bump when chunking or the schema changes; an index in another format is rebuilt."""

NO_MODEL_NOTE = (
    "embedding model not installed: run `opencomposer models pull "
    "all-minilm-l6-v2`; these are keyword (BM25) matches"
)

_LEXICAL = "lexical"  # the embedder identity recorded when there is none
_SNIFF_BYTES = 8192
# A file checked within 2 s of its mtime is hashed again next time: FAT's mtime resolution
# is 2 s and most others are finer, so a later write always shows a different mtime.
_RACY_NS = 2_000_000_000
# Chunks embedded per transaction: about 8 s of work at the measured 32 chunks/s, the most a
# crash can lose.
_GROUP_CHUNKS = 256

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, hash TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, checked_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, symbol TEXT, text TEXT NOT NULL, embedding BLOB);
CREATE INDEX IF NOT EXISTS chunks_by_path ON chunks (path);
"""


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    """Cosine similarity (semantic) or BM25 score (lexical): comparable within one search."""


@dataclass(frozen=True)
class SearchOutcome:
    method: Literal["semantic", "lexical"]
    hits: list[Hit]
    """Best first."""

    note: str | None
    """Why the answer is lexical, for the model to pass on; None for semantic answers."""


@dataclass
class UpdateStats:
    files_seen: int
    """Listed regular files within the size limit."""

    files_embedded: int
    """New or changed text files, re-chunked (and embedded, when there is a model)."""

    chunks_added: int
    chunks_removed: int
    seconds: float


@dataclass(frozen=True)
class _FileChunks:
    """A new or changed file, chunked, waiting to be embedded and stored."""

    path: str
    size: int
    mtime_ns: int
    digest: str
    chunks: list[Chunk]


@dataclass(frozen=True)
class _Stamp:
    hash: str
    size: int
    mtime_ns: int
    checked_ns: int

    def trusted(self, size: int, mtime_ns: int) -> bool:
        return (size, mtime_ns) == (
            self.size,
            self.mtime_ns,
        ) and self.mtime_ns + _RACY_NS <= self.checked_ns


class SemanticIndex:
    """One workspace's index. Calls are serialised by a lock, so worker threads may share it."""

    def __init__(
        self,
        root: Path,
        list_files: Callable[[], Iterable[Path]],
        index_path: Path,
        embedder: MiniLMEmbedder | None,
    ) -> None:
        self.root = root
        self._tree = Tree(root)  # files are read beneath it, never through a symlink
        self.list_files = list_files
        self.embedder = embedder
        self._lock = threading.Lock()
        private_database(index_path)  # the index holds the workspace's code: 0600, 0700
        self._db = sqlite3.connect(index_path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        wanted = {
            "format": INDEX_FORMAT,
            "embedder": embedder.identity if embedder is not None else _LEXICAL,
        }
        if dict(self._db.execute("SELECT key, value FROM meta").fetchall()) != wanted:
            with self._db:
                self._db.execute("DELETE FROM chunks")
                self._db.execute("DELETE FROM files")
                self._db.execute("DELETE FROM meta")
                self._db.executemany("INSERT INTO meta VALUES (?, ?)", wanted.items())
        self._chunks: dict[int, Chunk] = {}
        self._by_path: dict[str, list[int]] = {}
        self._vectors: dict[int, np.ndarray] = {}
        self._bm25 = BM25Index()  # fed only when there is no embedder
        self._matrix: tuple[list[int], torch.Tensor] | None = None  # cached stack of _vectors
        rows = self._db.execute(
            "SELECT id, path, start_line, end_line, text, symbol, embedding FROM chunks ORDER BY id"
        )
        for chunk_id, *fields, blob in rows:
            self._remember(chunk_id, Chunk(*fields), blob)

    def close(self) -> None:
        self._db.close()

    # ------------------------------------------------------------------ update

    def update(self) -> UpdateStats:
        """Bring the index in line with `list_files()`; returns what it did."""
        with self._lock:
            started = time.perf_counter()
            stamps = {
                path: _Stamp(*rest)
                for path, *rest in self._db.execute(
                    "SELECT path, hash, size, mtime_ns, checked_ns FROM files"
                )
            }
            listed = dict(self._listing())
            stats = UpdateStats(len(listed), 0, 0, 0, 0.0)
            gone = sorted(stamps.keys() - listed.keys())
            with self._db:
                self._db.executemany("DELETE FROM chunks WHERE path = ?", [(p,) for p in gone])
                self._db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in gone])
            stats.chunks_removed += self._drop(gone)
            group: list[_FileChunks] = []
            unchanged: list[tuple[str, str, int, int, int]] = []  # fresh `files` rows
            for path, (size, mtime_ns) in listed.items():
                stamp = stamps.get(path)
                if stamp is not None and stamp.trusted(size, mtime_ns):
                    continue
                try:
                    data = self._tree.read(Path(path), MAX_FILE_BYTES)
                except (OSError, Denied):
                    continue  # vanished or grew since the listing: the next update sees it
                digest = hashlib.blake2b(data, digest_size=16).hexdigest()
                if stamp is not None and stamp.hash == digest:
                    unchanged.append((path, digest, size, mtime_ns, time.time_ns()))
                    continue
                binary = b"\x00" in data[:_SNIFF_BYTES]
                chunks = [] if binary else chunk_file(path, data.decode("utf-8", "replace"))
                stats.files_embedded += not binary
                group.append(_FileChunks(path, size, mtime_ns, digest, chunks))
                if sum(len(entry.chunks) for entry in group) >= _GROUP_CHUNKS:
                    self._store(group, stats)
                    group = []
            self._store(group, stats)
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", unchanged
                )
            stats.seconds = time.perf_counter() - started
            return stats

    def _listing(self) -> Iterator[tuple[str, tuple[int, int]]]:
        """(workspace-relative posix path, (size, mtime_ns)) of each listed regular file
        within the size limit."""
        for listed in self.list_files():
            absolute = listed if listed.is_absolute() else self.root / listed
            try:
                relative = absolute.relative_to(self.root).as_posix()
                info = self._tree.lstat(absolute)
            except (ValueError, OSError, Denied):
                continue
            if info is not None and stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
                yield relative, (info.st_size, info.st_mtime_ns)

    def _store(self, group: list[_FileChunks], stats: UpdateStats) -> None:
        """Replace the chunks of a group of files in one transaction, then in memory."""
        if not group:
            return
        chunks = [chunk for entry in group for chunk in entry.chunks]
        vectors: list[bytes | None] = [None] * len(chunks)
        if self.embedder is not None and chunks:
            embedded = self.embedder.encode([embedding_input(c) for c in chunks])
            vectors = [row.tobytes() for row in embedded.astype(np.float16)]
        paths = [entry.path for entry in group]
        with self._db:
            self._db.executemany("DELETE FROM chunks WHERE path = ?", [(p,) for p in paths])
            now = time.time_ns()
            self._db.executemany(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)",
                [(e.path, e.digest, e.size, e.mtime_ns, now) for e in group],
            )
            ids = [
                self._db.execute(
                    "INSERT INTO chunks (path, start_line, end_line, symbol, text, embedding)"
                    " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    (c.path, c.start_line, c.end_line, c.symbol, c.text, blob),
                ).fetchone()[0]
                for c, blob in zip(chunks, vectors, strict=True)
            ]
        stats.chunks_removed += self._drop(paths)
        for chunk_id, chunk, blob in zip(ids, chunks, vectors, strict=True):
            self._remember(chunk_id, chunk, blob)
        stats.chunks_added += len(chunks)

    def _drop(self, paths: list[str]) -> int:
        """Forget the chunks of `paths` in memory; returns how many."""
        removed = 0
        for path in paths:
            for chunk_id in self._by_path.pop(path, []):
                del self._chunks[chunk_id]
                self._vectors.pop(chunk_id, None)
                self._bm25.remove(chunk_id)
                removed += 1
        self._matrix = None
        return removed

    def _remember(self, chunk_id: int, chunk: Chunk, blob: bytes | None) -> None:
        self._chunks[chunk_id] = chunk
        self._by_path.setdefault(chunk.path, []).append(chunk_id)
        if blob is not None:
            self._vectors[chunk_id] = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
        if self.embedder is None:
            self._bm25.add(chunk_id, embedding_input(chunk))
        self._matrix = None

    # ------------------------------------------------------------------ search

    def search(self, query: str, top_k: int = 10, path_prefix: str | None = None) -> SearchOutcome:
        """The chunks closest to `query`, optionally only under `path_prefix` (a
        workspace-relative folder or file). Searches what the last `update()` indexed."""
        with self._lock:
            in_scope = _scope(path_prefix)
            if self.embedder is None:
                accept = None if in_scope is None else (lambda i: in_scope(self._chunks[i].path))
                found = self._bm25.search(query, top_k, accept)
                hits = [Hit(self._chunks[i], score) for i, score in found]
                return SearchOutcome("lexical", hits, NO_MODEL_NOTE)
            if top_k <= 0 or not self._vectors:
                return SearchOutcome("semantic", [], None)
            ids, matrix = self._stacked()
            # In torch, not numpy: OpenBLAS's threads and torch's spin against each other
            # when used in turn (measured on 2 cores: 26 ms a query with numpy, 7.5 with torch).
            scores = (matrix @ torch.from_numpy(self.embedder.encode([query])[0])).numpy()
            rows = (
                np.arange(len(ids))
                if in_scope is None
                else np.flatnonzero([in_scope(self._chunks[i].path) for i in ids])
            )
            best = rows[np.argsort(-scores[rows], kind="stable")[:top_k]]
            hits = [Hit(self._chunks[ids[row]], float(scores[row])) for row in best]
            return SearchOutcome("semantic", hits, None)

    def _stacked(self) -> tuple[list[int], torch.Tensor]:
        """Chunk ids in (path, line) order and their vectors as one matrix; ties in score
        therefore rank by place in the workspace."""
        if self._matrix is None:
            ids = sorted(
                self._vectors, key=lambda i: (self._chunks[i].path, self._chunks[i].start_line, i)
            )
            self._matrix = (ids, torch.from_numpy(np.stack([self._vectors[i] for i in ids])))
        return self._matrix


def _scope(path_prefix: str | None) -> Callable[[str], bool] | None:
    """Whether a path is `path_prefix` or inside it; None (no filter) for empty or `.`."""
    prefix = (path_prefix or "").strip().removeprefix("./").strip("/")
    if prefix in ("", "."):
        return None
    return lambda path: path == prefix or path.startswith(prefix + "/")
