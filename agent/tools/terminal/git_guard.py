"""Keeping sandboxed commands from changing what the user's own git runs on the host.

Before a command, every place in the workspace that decides what git runs (see git_scan:
git directories, `.git` files, included config files, configured hooks folders) is bound
read-only into its sandbox; a hooks folder that does not exist yet is made, empty, so that
it can be (git ignores an empty folder, and `git status` does not show one). What a command
creates cannot be bound in advance: after it, and whenever a job's output is read, the
places are surveyed again, and each one the guard has not seen before (a new `.git`, or a
path whose file or folder was replaced: `mv sub old && git init sub`) is neutralized by
git_clean, reported once, and then trusted. The file tools ask `write_protection` before
every write.

A place is trusted ("vetted") when the guard finds it while no command of its own has run
since its last review, so it was made by the user; while a command may still be writing,
what it made is cleaned again at every review. Each guard answers for its own commands: a
second harness on the same workspace reviews what its commands make.
"""

import asyncio
import contextlib
import logging
import os
import re
import stat
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from opencomposer.agent.tools.terminal.git_clean import GitChange, Quarantine
from opencomposer.agent.tools.terminal.git_config import config_facts
from opencomposer.agent.tools.terminal.git_scan import (
    Entry,
    GitWalk,
    Repository,
    common_dir,
    dot_git_entry,
    enclosing_repository,
    gitdir_markers,
    gitdir_of,
    looks_like_gitdir,
    real_path,
    repository,
)

log = logging.getLogger(__name__)

Role = Literal["gitdir", "pointer", "config", "hooks"]

# What git prints when the sandbox refused it a write: "Unable to create '.../.git/index.lock':
# Read-only file system", "could not lock config file .git/config: Read-only file system",
# and, for objects, "unable to create temporary file: Read-only file system"; renaming or
# removing a pinned path itself fails with EBUSY.
_READ_ONLY = re.compile(r"^.*(?:Read-only file system|Device or resource busy).*$", re.MULTILINE)
_PATH_LIKE = re.compile(r"[\w.@+~/-]+")
_GIT_OBJECT_WRITE = "unable to create temporary file: Read-only file system"

_Identity = tuple[int, int, int] | None


@dataclass(frozen=True)
class Place:
    role: Role
    path: Path


_Places = dict[Place, _Identity]


class GitGuard:
    """One workspace's guard, for the commands of one sandbox; thread-safe."""

    def __init__(self, root: Path, quarantine: Path) -> None:
        self.root = root.resolve()
        self._walk = GitWalk(self.root)
        self._quarantine = Quarantine(self.root, quarantine)
        self._lock = threading.Lock()
        self._vetted: set[_Identity] = set()
        """The files and folders (device, inode, type) of every place when last vetted: a
        vetted git directory moved elsewhere (`mv lib lib-old`) is still the user's."""
        self._unreviewed = False
        self._starting = 0
        self._live: list[asyncio.subprocess.Process] = []
        self._changes: list[GitChange] = []
        self._pinned: list[Path] = []

    # ------------------------------------------------------------------ around a command

    def prepare(self) -> list[Path]:
        """Before a command starts: the paths to bind read-only (a worker thread may call
        this; the walk takes milliseconds on a large tree). `started` must follow."""
        with self._lock:
            quiet = self._quiet()
            survey = self._survey(self._walk.scan(), trust_all=quiet)
            pins = self._pins(survey)
            if quiet:
                self._vet(survey)
            self._starting += 1
            self._unreviewed = True
            self._pinned = pins
            return pins

    def started(self, process: asyncio.subprocess.Process | None) -> None:
        """The command `prepare` was for is running (or failed to start: None)."""
        with self._lock:
            self._starting -= 1
            if process is not None:
                self._live.append(process)

    async def review(self) -> None:
        """After a command, and whenever a job's output is read: neutralize what commands
        made since the last review; `take()` returns it."""
        await asyncio.to_thread(self._review)

    def take(self) -> list[GitChange]:
        """What reviews neutralized since the last take, each reported once."""
        with self._lock:
            changes, self._changes = self._changes, []
            return changes

    def blocked(self, output: str) -> bool:
        """Whether `output` shows a write the read-only binds refused (git failing on its
        own directory, a hook written into a pinned folder): a refusal naming `.git` or a
        path that leads, symlinks followed from the workspace root, into a pinned one."""
        if _GIT_OBJECT_WRITE in output:
            return True
        for line in _READ_ONLY.findall(output):
            if ".git" in line:
                return True
            for word in _PATH_LIKE.findall(line):
                path = real_path(self.root / word)
                if any(path.is_relative_to(pin) for pin in self._pinned):
                    return True
        return False

    # ------------------------------------------------------------------ state

    def _quiet(self) -> bool:
        """No command of ours has run since the last review, none is starting or running:
        anything new was made by the user."""
        return not (self._unreviewed or self._busy())

    def _busy(self) -> bool:
        """A command of ours is starting or running."""
        self._live = [process for process in self._live if process.returncode is None]
        return bool(self._starting or self._live)

    def _review(self) -> None:
        """Clean what is new in two passes: git directories first, whose config then names
        no hooks folder or include; then the places their cleaned config names (a hooks
        folder the user's global config makes relative to every work tree)."""
        with self._lock:
            if not self._unreviewed:
                return
            self._quarantine.begin()
            cleaned: set[Place] = set()
            entries = self._walk.scan()
            complete = self._walk.complete
            complete &= self._clean(self._survey(entries, trust_all=False), cleaned)
            final = self._survey(entries, trust_all=True)
            complete &= self._clean(final, cleaned)
            if complete and not self._busy():
                self._vet(final)
                self._unreviewed = False

    def _clean(self, survey: _Places, cleaned: set[Place]) -> bool:
        """Neutralize each place not vetted as it is now and not cleaned in this review;
        False when one could not be checked."""
        complete = True
        for place, identity in survey.items():
            if place in cleaned or identity is None or identity in self._vetted:
                continue
            cleaned.add(place)
            try:
                changes = self._neutralize(place)
            except OSError as exc:
                log.warning("could not neutralize %s: %s", place.path, exc)
                changes = [
                    GitChange(
                        place.path.relative_to(self.root).as_posix(),
                        "not checked",
                        exc.strerror or str(exc),
                        "",
                    )
                ]
            self._changes += changes
            complete &= not any(change.action == "not checked" for change in changes)
        return complete

    def _neutralize(self, place: Place) -> list[GitChange]:
        if place.role == "gitdir":
            return self._quarantine.gitdir(place.path)
        if place.role == "hooks":
            return self._quarantine.hooks(place.path)
        if place.role == "config":
            return self._quarantine.config(place.path)
        target = gitdir_of(place.path)
        if target is None or not target.is_relative_to(self.root):
            return self._quarantine.pointer(place.path)
        return []  # its target is a git directory place of its own

    def _vet(self, survey: _Places) -> None:
        """Trust the places as they are now (cleaning and made hooks folders changed some)."""
        self._vetted = {_identity(place.path) for place in survey} - {None}

    # ------------------------------------------------------------------ places

    def _survey(self, entries: Iterable[Entry], *, trust_all: bool) -> _Places:
        """Every place the walk's `entries` lead to, with its identity now (cleaning only
        removes entries, so one walk serves a review's two passes). Config files and hooks
        folders come from the config of repositories whose git directory is vetted (or all,
        `trust_all`), since a command's own repository gets its config rewritten instead:
        believing it would let a command name any project folder as hooks for us to empty."""
        places: dict[Place, _Identity] = {}
        repositories: list[tuple[Repository, bool]] = []
        for entry in entries:
            if entry.kind in ("file", "link"):
                self._add(places, Place("pointer", entry.path))
            repo = repository(entry)
            if repo is None:
                continue
            for gitdir in filter(None, [repo.gitdir, common_dir(repo.gitdir)]):
                if gitdir.is_relative_to(self.root):
                    self._add(places, Place("gitdir", gitdir))
            trusted = (
                not repo.gitdir.is_relative_to(self.root)
                or trust_all
                or places.get(Place("gitdir", repo.gitdir)) in self._vetted
            )
            repositories.append((repo, trusted))
        outer = enclosing_repository(self.root.parent)
        if outer is not None:
            repositories.append((outer, True))
        gitdirs = [place.path for place in places if place.role == "gitdir"]
        for repo, trusted in repositories:
            facts = config_facts(repo) if trusted else None
            if facts is None:
                continue
            for path in facts.files:
                if self._outside_gitdirs(path, gitdirs):
                    self._add(places, Place("config", path))
            if facts.hooks is not None and self._outside_gitdirs(facts.hooks, gitdirs):
                self._add(places, Place("hooks", facts.hooks))
        return places

    def _outside_gitdirs(self, path: Path, gitdirs: Iterable[Path]) -> bool:
        """In the workspace, and not in a git directory (bound whole anyway)."""
        return path.is_relative_to(self.root) and not any(
            path.is_relative_to(gitdir) for gitdir in gitdirs
        )

    def _add(self, places: dict[Place, _Identity], place: Place) -> None:
        places[place] = _identity(place.path)

    def _pins(self, survey: _Places) -> list[Path]:
        """What to bind read-only: each place that exists (a symlink's target rather than
        the link; the first existing path on the way to a missing hooks folder, made when
        that is a folder)."""
        pins: list[Path] = []
        for place in survey:
            path = place.path
            if place.role == "hooks" and not os.path.lexists(path):
                try:
                    path = _make_folders(self.root, path)
                except OSError as exc:  # a command cannot make it either
                    log.warning("could not make the hooks folder %s: %s", path, exc)
                    continue
            if place.role == "pointer" and path.is_symlink():
                continue  # the target is a place of its own; a mount lands on it anyway
            if os.path.lexists(path):
                pins.append(path)
        return _outermost(pins)


def _identity(path: Path) -> _Identity:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode)


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """Sorted, without paths inside another (a bind covers what lies below it)."""
    kept: list[Path] = []
    for path in sorted(set(paths)):
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept


def _make_folders(root: Path, path: Path) -> Path:
    """Make the missing folders of `path` beneath `root`, never through a symlink; return
    `path`, or the existing non-folder that stands in the way (which is then bound instead,
    so that it cannot be replaced by a folder)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    current = root
    try:
        for name in path.relative_to(root).parts:
            current = current / name
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=fd)
            try:
                child = os.open(name, flags, dir_fd=fd)
            except OSError:
                return current
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    return path


def write_protection(root: Path, path: Path) -> str | None:
    """Why the file tools must not write `path` (resolved, inside `root`), or None: it would
    lie in a git directory or make a folder into one, or it is a config file or lies in the
    hooks folder of a repository whose work tree holds it."""
    parts = path.relative_to(root).parts
    for depth, below in enumerate(parts):
        folder = root.joinpath(*parts[:depth])
        written = below + ("/" if depth < len(parts) - 1 else "")
        if looks_like_gitdir(gitdir_markers(folder) | {written}):
            return f"inside the git directory {folder.relative_to(root).as_posix() or '.'}"
    for repo in _repositories_holding(root, path):
        facts = config_facts(repo)
        if facts is None:
            continue
        if facts.hooks is not None and path.is_relative_to(facts.hooks):
            return "in the folder git runs hooks from (core.hooksPath)"
        if path in facts.files:
            return "a config file git reads"
    return None


def _repositories_holding(root: Path, path: Path) -> Iterator[Repository]:
    """Each repository with a `.git` between `path` and `root`, and the one around `root`."""
    for folder in path.parents:
        if not folder.is_relative_to(root):
            break
        dot_git = folder / ".git"
        if dot_git.is_symlink() or dot_git.exists():
            repo = repository(dot_git_entry(dot_git))
            if repo is not None:
                yield repo
    outer = enclosing_repository(root.parent)
    if outer is not None:
        yield outer
