"""Finding what in a workspace decides which programs the host's git runs.

Git runs code named by a repository's git directory (hooks, config keys that name programs,
a `commondir` that borrows another directory's config and hooks), by config files the
repository includes, and by a configured hooks folder. A git directory is a `.git` folder,
the target of a `.git` file (`gitdir: ...`, as worktrees and submodules have) or symlink,
or any folder that is one itself: git takes a folder holding HEAD with objects/ and refs/
(or with commondir) for a bare repository wherever it is run, so a command could make one
without any `.git` in sight.

The walk lists each folder once, and afterwards only the folders whose ctime changed:
adding, removing or renaming an entry changes its folder's ctime, and, unlike mtime, no
program can set it back. A folder changed within RACY_NS of being listed is listed again the
next time, as a change in the same clock tick would not show (git's rule for a racy index).
Symlinked folders are not followed and git directories are not entered.
"""

import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

# Two seconds cover the coarsest ctime of a Linux file system in use (FAT's 2 s); ext4 and
# xfs tick in milliseconds, so only folders changed in the last two seconds are re-listed.
RACY_NS = 2_000_000_000
# A `.git` file or `commondir` is one line; anything longer is not one git would accept.
_POINTER_BYTES = 4096
Kind = Literal["folder", "file", "link", "bare"]
"""A `.git` folder, `.git` file, `.git` symlink, or a folder that is a git directory itself."""


@dataclass(frozen=True)
class Entry:
    path: Path
    kind: Kind


@dataclass(frozen=True)
class Repository:
    gitdir: Path
    worktree: Path
    """Where git runs hooks, so where a relative core.hooksPath starts: the folder holding
    `.git`, or the git directory itself for a bare repository."""


class _Listing(NamedTuple):
    ino: int
    ctime_ns: int
    listed_ns: int
    folders: tuple[str, ...]
    """Full paths: joined once, not at every scan."""
    gits: tuple[tuple[str, Kind], ...]
    is_gitdir: bool
    complete: bool = True


class GitWalk:
    """Every git entry of one tree, cheaply again and again."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, _Listing] = {}
        self.listed = 0
        """Folders listed by the last scan (the others came from the cache)."""

        self.complete = True
        """Whether the last scan listed every folder it met (one that changed while it was
        being listed, or became a symlink on the way, is not)."""

    def scan(self) -> list[Entry]:
        found: list[Entry] = []
        cache: dict[str, _Listing] = {}
        self.listed = 0
        self.complete = True
        stack = [str(self.root)]
        while stack:
            folder = stack.pop()
            try:
                info = os.lstat(folder)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                continue
            listing = self._cache.get(folder)
            if listing is None or not _still_valid(listing, info):
                listing = _list(folder)
                self.listed += 1
                self.complete &= listing.complete
            cache[folder] = listing
            if listing.is_gitdir:
                found.append(Entry(Path(folder), "bare"))
                continue
            found += (Entry(Path(folder, name), kind) for name, kind in listing.gits)
            stack.extend(listing.folders)
        self._cache = cache
        return found


def _still_valid(listing: _Listing, info: os.stat_result) -> bool:
    return (
        listing.complete
        and listing.ino == info.st_ino
        and listing.ctime_ns == info.st_ctime_ns
        and info.st_ctime_ns < listing.listed_ns - RACY_NS
    )


def _list(folder: str) -> _Listing:
    """The folder's entries, read through a descriptor opened without following a symlink,
    whose real path must still be `folder` (a folder on the way swapped for a symlink would
    lead the walk out of the tree). An unreadable folder lists empty: the user's git, run by
    the same user, cannot read it either."""
    listed_ns = _now_ns()
    folders: list[str] = []
    gits: list[tuple[str, Kind]] = []
    names: set[str] = set()
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except PermissionError:
        return _Listing(-1, -1, listed_ns, (), (), False, complete=True)
    except OSError:
        return _Listing(-1, -1, listed_ns, (), (), False, complete=False)
    try:
        if os.readlink(f"/proc/self/fd/{fd}") != folder:
            return _Listing(-1, -1, listed_ns, (), (), False, complete=False)
        info = os.fstat(fd)
        with os.scandir(fd) as entries:
            for entry in entries:
                is_dir = entry.is_dir(follow_symlinks=False)
                names.add(entry.name + ("/" if is_dir else ""))
                if entry.name == ".git":
                    kind: Kind = "link" if entry.is_symlink() else "folder" if is_dir else "file"
                    gits.append((entry.name, kind))
                elif is_dir:
                    folders.append(os.path.join(folder, entry.name))
    except OSError:
        return _Listing(-1, -1, listed_ns, (), (), False, complete=False)
    finally:
        os.close(fd)
    return _Listing(
        info.st_ino,
        info.st_ctime_ns,
        listed_ns,
        tuple(folders),
        tuple(gits),
        looks_like_gitdir(names),
    )


def _now_ns() -> int:
    """The clock file systems stamp changes with (the kernel's coarse wall clock lags
    time_ns() by at most a tick, which RACY_NS covers)."""
    return time.time_ns()


def real_path(path: Path) -> Path:
    """`path` with symlinks followed as far as they lead. Unlike Path.resolve(), a symlink
    loop (`ln -s .git .git`, which any command can make) is no error."""
    return Path(os.path.realpath(path))


def looks_like_gitdir(names: Iterable[str]) -> bool:
    """git's test for a git directory, on a folder's entry names (folders end in "/"):
    HEAD, and objects/ with refs/ or a commondir that lends them."""
    present = set(names)
    head = "HEAD" in present or "HEAD/" in present
    return head and ({"objects/", "refs/"} <= present or "commondir" in present)


def read_pointer(path: Path) -> str | None:
    """The text of a small file (a `.git` file, a commondir), never through a final
    symlink; None when it is missing, not a regular file, or too long."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = handle.read(_POINTER_BYTES + 1)
    if len(data) > _POINTER_BYTES:
        return None
    return data.decode("utf-8", errors="replace").strip()


def gitdir_of(pointer: Path) -> Path | None:
    """The git directory a `.git` file or symlink names, resolved (as git does, a relative
    `gitdir:` starts at the folder holding the `.git`)."""
    target = real_path(pointer)
    if target.is_dir():
        return target
    text = read_pointer(target)
    if text is None or not text.startswith("gitdir:"):
        return None
    return real_path(pointer.parent / text.removeprefix("gitdir:").strip())


def common_dir(gitdir: Path) -> Path | None:
    """The directory a worktree's `commondir` lends config, hooks, objects and refs from."""
    text = read_pointer(gitdir / "commondir")
    return real_path(gitdir / text) if text else None


def repository(entry: Entry) -> Repository | None:
    if entry.kind == "bare":
        return Repository(entry.path, entry.path)
    gitdir = entry.path if entry.kind == "folder" else gitdir_of(entry.path)
    return Repository(gitdir, entry.path.parent) if gitdir is not None else None


def dot_git_entry(path: Path) -> Entry:
    kind: Kind = "link" if path.is_symlink() else "folder" if path.is_dir() else "file"
    return Entry(path, kind)


def enclosing_repository(folder: Path) -> Repository | None:
    """The repository git finds from `folder` (the nearest `.git` or git directory on the
    way up), as the user's git does when run there."""
    for candidate in (folder, *folder.parents):
        dot_git = candidate / ".git"
        if dot_git.is_symlink() or dot_git.exists():
            return repository(dot_git_entry(dot_git))
        if looks_like_gitdir(gitdir_markers(candidate)):
            return Repository(candidate, candidate)
    return None


def gitdir_markers(folder: Path) -> set[str]:
    """The entries of `folder` that `looks_like_gitdir` asks about, as it wants them."""
    return {
        f"{name}/" if (folder / name).is_dir() else name
        for name in ("HEAD", "objects", "refs", "commondir")
        if (folder / name).exists()
    }
