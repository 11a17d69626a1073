"""Copying what a command left into the quarantine folder when that lies on another file
system: a bounded copy, never a dense one.

A rename cannot cross file systems, and a plain copy would let the command choose its cost:
a terabyte-long sparse file costs it nothing and a dense copy fills the data folder; a
million empty files fill its inodes. So a copy keeps each file's first KEEP_FILE_BYTES (its
holes stay holes), at most KEEP_BYTES and KEEP_ENTRIES per review, symbolic links as links,
and no FIFO, socket or device; what it leaves out is noted for the report. Everything is
opened beneath the folder's descriptor without following a symlink. Removing the original
is the caller's (`remove`), whatever was kept: what matters is that the host's git no
longer finds it. A copy the data folder has no room for is removed again and the OSError
raised.
"""

import contextlib
import errno
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

# Hooks, rebase todo lists and config files are a few KiB; more of one is not needed to see
# what a command tried.
KEEP_FILE_BYTES = 1024 * 1024
KEEP_BYTES = 16 * 1024 * 1024
KEEP_ENTRIES = 1_000
# Folders nested deeper inside what is set aside are not copied (git's own layouts are
# shallow: rebase-merge/, hooks/).
MAX_DEPTH = 16
_CHUNK = 1024 * 1024

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Budget:
    """What one review may still copy across file systems."""

    bytes: int = KEEP_BYTES
    entries: int = KEEP_ENTRIES
    skipped: int = 0
    """Entries met once `entries` was spent (not copied, nor looked into)."""


def copy_out(fd: int, name: str, destination: Path, budget: Budget) -> list[str]:
    """Copy `name` (a file, link or folder in the folder `fd`) to `destination`, which must
    not exist, within `budget`; returns what it left out. An OSError (a full data folder)
    removes what it had copied."""
    notes: list[str] = []
    skipped = budget.skipped
    try:
        _copy(fd, name, destination, budget, notes, name, 0)
    except OSError:
        discard(destination)
        raise
    if budget.skipped > skipped:
        left = budget.skipped - skipped
        notes.append(f"{left:,} entries not kept (the quarantine keeps {KEEP_ENTRIES:,} a review)")
    return notes


def remove(fd: int, name: str) -> None:
    """Remove `name` from the folder `fd`, a folder with everything in it (no symlink is
    followed)."""
    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=fd)
    else:
        os.unlink(name, dir_fd=fd)


def discard(path: Path) -> None:
    """Remove a partial copy in the quarantine folder, if any."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _copy(
    fd: int, name: str, to: Path, budget: Budget, notes: list[str], shown: str, depth: int
) -> None:
    if budget.entries <= 0:
        budget.skipped += 1
        return
    budget.entries -= 1
    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=fd), to)
    elif stat.S_ISDIR(info.st_mode):
        to.mkdir(mode=0o700)
        if depth >= MAX_DEPTH:
            notes.append(f"{shown}: its contents not kept (nested over {MAX_DEPTH} deep)")
            return
        folder = os.open(name, _FOLDER, dir_fd=fd)
        try:
            for entry in sorted(_names(folder)):
                _copy(folder, entry, to / entry, budget, notes, f"{shown}/{entry}", depth + 1)
        finally:
            os.close(folder)
    elif stat.S_ISREG(info.st_mode):
        _copy_file(fd, name, to, budget, notes, shown)
    else:
        notes.append(f"{shown}: not a regular file, not kept")


def _copy_file(fd: int, name: str, to: Path, budget: Budget, notes: list[str], shown: str) -> None:
    """The file's first bytes, up to what the budget allows, its holes left holes."""
    source = os.open(name, _FILE, dir_fd=fd)
    try:
        info = os.fstat(source)
        if not stat.S_ISREG(info.st_mode):  # swapped since the lstat
            notes.append(f"{shown}: not a regular file, not kept")
            return
        size = info.st_size
        keep = min(size, KEEP_FILE_BYTES, budget.bytes)
        target = os.open(to, _NEW, 0o600)
        try:
            _copy_data(source, target, keep)
        finally:
            os.close(target)
        budget.bytes -= keep
        if keep < size:
            notes.append(f"{shown}: {size:,} bytes, its first {keep:,} kept")
    finally:
        os.close(source)


def _copy_data(source: int, target: int, length: int) -> None:
    """Bytes [0, length) of `source`, only where it holds data (SEEK_DATA / SEEK_HOLE), so a
    sparse file's copy is as sparse."""
    offset = 0
    while offset < length:
        try:
            start = os.lseek(source, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole from here on
                break
            raise
        if start >= length:
            break
        end = min(os.lseek(source, start, os.SEEK_HOLE), length)
        while start < end:
            chunk = os.pread(source, min(_CHUNK, end - start), start)
            if not chunk:  # shortened since the fstat
                end = start
                break
            written = 0
            while written < len(chunk):
                written += os.pwrite(target, chunk[written:], start + written)
            start += len(chunk)
        offset = end
    os.ftruncate(target, length)


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return [entry.name for entry in entries]
