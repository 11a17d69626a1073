"""The workspace symbol index: every supported file's outline, searchable by name, kept fresh by
a file watcher.

The state is a dict of files that build/update replace whole, one writer at a time under a
lock, never mutating a published one, so `search` on the event loop reads a single reference
while a worker thread parses.
Files are read as bytes beneath a descriptor of the root (`beneath.Tree`: a symlink swapped
into the tree is never followed), skipped above MAX_FILE_BYTES, and not re-parsed when their
blake2b digest is unchanged. Parsing is sequential: py-tree-sitter holds the GIL while it parses, so
threads would only add contention. `search` ranks every matching name (7-40 ms over the 75k
symbols of CPython's standard library); each file keeps its names joined in one string, so a
file without a match is skipped after one substring test and one regex search.

Ignore rules: `list_files` is the authority, and `update` trusts its caller. `watch` keeps the
set of listed files and applies an event on a listed file directly. An event on a supported file
that is not listed re-lists once per batch; a file still not listed is remembered as ignored
until it is deleted or an ignore file changes, so build outputs that are rewritten on every
build cost nothing after the first time. A changed `.gitignore` (`.ignore`, `.rgignore`) or a
directory appearing (moved in, or created faster than the watcher could follow) re-lists and
reconciles the whole index: files that became ignored leave, files that became visible join.
Events under IGNORED_DIRS are dropped unseen.
"""

import asyncio
import hashlib
import heapq
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from watchfiles import Change, awatch

from opencomposer.agent.tools.beneath import FileTooLarge, Tree
from opencomposer.agent.tools.code_index.languages import language_for
from opencomposer.agent.tools.code_index.outline import Symbol, outline
from opencomposer.agent.tools.errors import Denied

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 2 * 1024 * 1024
"""Larger files (generated code, bundles) are not parsed."""

IGNORED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__"})
"""Folders whose events the watcher drops: version-control data, dependencies, bytecode."""

IGNORE_FILES = frozenset({".gitignore", ".ignore", ".rgignore"})
"""Files whose change can change what list_files returns."""

# Words of a name for initials matching: `HTTPServer` -> HTTP Server, `get_file_name` -> get
# file name, `parse2D` -> parse 2 D.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@dataclass
class IndexStats:
    files: int
    """Files indexed (those over MAX_FILE_BYTES not counted)."""

    symbols: int
    seconds: float
    """How long this build or update took."""

    parsed: int
    """Files this call parsed; a changed file whose content is unchanged is not."""

    too_large: int
    """Supported files left out for being larger than MAX_FILE_BYTES."""


@dataclass(frozen=True)
class _File:
    digest: bytes
    symbols: tuple[Symbol, ...] = ()
    names: str = ""
    """The symbols' names lowercased, one a line."""

    words: str = ""
    """The symbols' names as lowercased words joined by spaces (`get file name`), one a line."""

    too_large: bool = False


class SymbolIndex:
    def __init__(self, root: Path, list_files: Callable[[], Iterable[Path]]) -> None:
        self.root = Path(root).resolve()
        self._tree = Tree(self.root)
        self._list_files = list_files
        # By workspace-relative path. Replaced whole, never mutated once published, so readers
        # need no lock.
        self._files: Mapping[str, _File] = {}
        self._ready = False
        self._lock = threading.RLock()
        self._listed: frozenset[str] | None = None
        self._ignored: set[str] = set()

    @property
    def ready(self) -> bool:
        """Whether a build has completed (search answers from an empty index before)."""
        return self._ready

    # ------------------------------------------------------------------ building

    def build(self) -> IndexStats:
        """Index every supported file list_files returns, from scratch."""
        started = time.perf_counter()
        with self._lock:
            self._listed = self._list()
            self._ignored.clear()
            loaded = {rel: _load(self._tree, rel, None) for rel in sorted(self._listed)}
            self._files = {rel: entry for rel, entry in loaded.items() if entry is not None}
            self._ready = True
            return self._stats(started, parsed=_parsed(loaded, {}))

    def update(self, changed: Iterable[Path] = (), deleted: Iterable[Path] = ()) -> IndexStats:
        """Re-parse the changed files (a missing one counts as deleted) and drop the deleted
        ones. Unsupported files and paths outside the root are ignored."""
        started = time.perf_counter()
        with self._lock:
            files = dict(self._files)
            for path in deleted:
                files.pop(self._relative(Path(path)) or "", None)
            wanted = {
                rel
                for path in changed
                if language_for(path) and (rel := self._relative(Path(path)))
            }
            previous = {rel: files[rel] for rel in wanted if rel in files}
            loaded = {rel: _load(self._tree, rel, previous.get(rel)) for rel in wanted}
            for rel, entry in loaded.items():
                if entry is None:
                    files.pop(rel, None)
                else:
                    files[rel] = entry
            self._files = files
            return self._stats(started, parsed=_parsed(loaded, previous))

    def _list(self) -> frozenset[str]:
        return frozenset(
            rel
            for path in self._list_files()
            if language_for(path) and (rel := self._relative(Path(path)))
        )

    def _stats(self, started: float, *, parsed: int) -> IndexStats:
        files = self._files.values()
        return IndexStats(
            files=sum(not f.too_large for f in files),
            symbols=sum(len(f.symbols) for f in files),
            seconds=time.perf_counter() - started,
            parsed=parsed,
            too_large=sum(f.too_large for f in files),
        )

    def _relative(self, path: Path) -> str | None:
        """The workspace-relative posix path of an absolute or workspace-relative path, None
        outside the root. A path through a symlinked root (a lister given the unresolved root)
        is resolved first."""
        path = self.root / path
        if ".." in path.parts or not path.is_relative_to(self.root):
            path = path.resolve()
            if not path.is_relative_to(self.root):
                return None
        relative = path.relative_to(self.root).as_posix()
        return relative if relative != "." else None

    # ------------------------------------------------------------------ querying

    def search(self, query: str, limit: int = 50, path_prefix: str | None = None) -> list[Symbol]:
        """Symbols whose name matches `query`, best first: exact name, then case-insensitive
        exact, prefix, word initials (`gfn` -> get_file_name, `hs` -> HTTPServer), substring;
        ties by path, then line. `path_prefix` keeps a file or folder (workspace-relative)."""
        if limit <= 0:
            return []
        matcher = _Matcher(query)
        prefix = (path_prefix or "").removeprefix("./").strip("/")
        prefix = "" if prefix == "." else prefix
        hits = []
        for rel, file in self._files.items():
            if prefix and rel != prefix and not rel.startswith(prefix + "/"):
                continue
            if not file.symbols or not matcher.may_match(file):
                continue
            for symbol, lower, words in zip(
                file.symbols, file.names.split("\n"), file.words.split("\n"), strict=True
            ):
                rank = matcher.rank(symbol.name, lower, words)
                if rank is not None:
                    hits.append((rank, symbol))
        best = heapq.nsmallest(
            limit,
            hits,
            key=lambda hit: (
                hit[0],
                hit[1].path,
                hit[1].line,
                hit[1].name,
                hit[1].kind,
                hit[1].end_line,
            ),
        )
        return [symbol for _, symbol in best]

    def symbols_in(self, path: Path) -> list[Symbol]:
        """The outline of an indexed file (absolute or workspace-relative), [] otherwise."""
        file = self._files.get(self._relative(Path(path)) or "")
        return list(file.symbols) if file else []

    # ------------------------------------------------------------------ watching

    async def watch(self, stop: asyncio.Event, *, debounce_ms: int = 50) -> None:
        """Apply file changes under the root to the index until `stop` is set. The module
        docstring says how ignore rules are honoured."""
        async for changes in awatch(
            self.root,
            watch_filter=self._watched,
            stop_event=stop,
            debounce=debounce_ms,
            step=min(50, debounce_ms),
        ):
            try:
                await asyncio.to_thread(self._apply, changes)
            except Exception:  # a failed lister or update must not end the watch
                log.exception("symbol index: applying %d file changes failed", len(changes))

    def _watched(self, change: Change, path: str) -> bool:
        relative = path[len(str(self.root)) + 1 :]
        return IGNORED_DIRS.isdisjoint(relative.split(os.sep))

    def _apply(self, changes: set[tuple[Change, str]]) -> None:
        """One batch of events. Touched files go to update as changed whatever the event, since
        a batch can hold a deletion and a re-creation of the same file: update drops a changed
        file that no longer exists."""
        touched: set[str] = set()
        unknown: set[str] = set()
        reconcile = False
        with self._lock:
            if self._listed is None:
                self._listed = self._list()
            indexed = self._files
            for change, raw in changes:
                path = Path(raw)
                rel = self._relative(path)
                if rel is None:
                    continue
                if path.name in IGNORE_FILES:
                    self._ignored.clear()
                    reconcile = True
                elif language_for(path) is None:
                    # A folder: moved out, its files get no events; moved or created in, some
                    # may have been written before the watcher saw the folder.
                    if change == Change.deleted:
                        touched.update(r for r in indexed if r.startswith(rel + "/"))
                    elif change == Change.added and self._kind(rel) == stat.S_IFDIR:
                        reconcile = True
                elif rel in self._listed or rel in indexed:
                    touched.add(rel)
                elif change == Change.deleted:
                    self._ignored.discard(rel)
                elif rel not in self._ignored:
                    unknown.add(rel)
            gone: set[str] = set()
            if reconcile or unknown:
                # Existence is checked before listing: a file created in between is listed.
                existing = {rel for rel in unknown if self._kind(rel) == stat.S_IFREG}
                self._listed = self._list()
                touched.update(unknown & self._listed)
                self._ignored.update(existing - self._listed)
            if reconcile:
                touched.update(self._listed - indexed.keys())
                gone = indexed.keys() - self._listed
            self.update(
                [self.root / rel for rel in touched - gone], [self.root / rel for rel in gone]
            )

    def _kind(self, rel: str) -> int | None:
        """The file type (stat.S_IFREG, S_IFDIR, ...) at a relative path, None when gone."""
        try:
            info = self._tree.lstat(Path(rel))
        except (OSError, Denied):
            return None
        return None if info is None else stat.S_IFMT(info.st_mode)


class _Matcher:
    """Ranks names against one query: 0 exact, 1 case-insensitive exact, 2 prefix, 3 word
    initials, 4 substring, None for no match.

    Initials: the query, lowercased and without underscores, splits into pieces that are
    prefixes of consecutive words of the name from its first word (`gfn` and `getfn` match
    get_file_name, `hs` matches HTTPServer). A regex over the space-joined words does the
    search: each next query character either continues the current word or starts the next
    (possessively skipping the rest of the word, so only that choice backtracks).
    """

    def __init__(self, query: str) -> None:
        self.query = query
        self.lower = query.lower()
        letters = [re.escape(c) for c in self.lower if not c.isspace() and c != "_"]
        self.initials = (
            re.compile(
                "^" + letters[0] + "".join(f"(?:{c}|[^ \n]*+ {c})" for c in letters[1:]),
                re.MULTILINE,
            )
            if letters
            else None
        )

    def may_match(self, file: _File) -> bool:
        """False when no name in the file can match: every rank but initials needs the query
        as a substring."""
        return self.lower in file.names or (
            self.initials is not None and self.initials.search(file.words) is not None
        )

    def rank(self, name: str, lower: str, words: str) -> int | None:
        if name == self.query:
            return 0
        if lower == self.lower:
            return 1
        if lower.startswith(self.lower):
            return 2
        if self.initials is not None and self.initials.match(words):
            return 3
        if self.lower in lower:
            return 4
        return None


def _parsed(loaded: Mapping[str, _File | None], previous: Mapping[str, _File]) -> int:
    return sum(
        entry is not None and not entry.too_large and entry is not previous.get(rel)
        for rel, entry in loaded.items()
    )


def _load(tree: Tree, rel: str, previous: _File | None) -> _File | None:
    """The file's outline, `previous` itself when the content is unchanged, None when it is
    gone or unreadable."""
    spec = language_for(rel)
    if spec is None:
        return None
    try:
        source = tree.read(Path(rel), MAX_FILE_BYTES)
    except FileTooLarge:
        return _File(b"", too_large=True)
    except (OSError, Denied):  # deleted since listed, a folder, unreadable, a symlink
        return None
    digest = hashlib.blake2b(source, digest_size=16).digest()
    if previous is not None and previous.digest == digest:
        return previous
    symbols = tuple(outline(rel, source, spec.name))
    return _File(
        digest,
        symbols,
        # A name with a line break (error recovery) must not shift the lines.
        names="\n".join(s.name.lower().replace("\n", " ") for s in symbols),
        words="\n".join(" ".join(_WORD.findall(s.name)).lower() for s in symbols),
    )
