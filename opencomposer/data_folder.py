"""The data folder running out of room, as one typed error wherever it is written.

Everything opencomposer keeps (the trace store, checkpoints, quarantine, logs) lives in one
folder, so a full file system there is one condition, not a dozen I/O errors: whatever
writes there turns `ENOSPC` (no space), `EDQUOT` (the user's quota) and `EFBIG` (a file
past what the file system or a size limit allows) into `DataFolderFull`, which names the
folder and what is free so the user knows what to do. SQLite says `SQLITE_FULL` for the
first, and a write I/O error for the other two (it keeps no errno), which counts as well.
Turns end failed with it, servers answer it as a refusal, not a crash.
"""

import errno
import os
import sqlite3
from pathlib import Path

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# SQLite's primary result code for "database or disk is full" (its extended codes keep it
# in the low byte), and SQLITE_IOERR_WRITE, what a failed write() that is not ENOSPC gives.
_SQLITE_FULL = 13
_SQLITE_IOERR_WRITE = 778
# Below this much free space a turn is not started: its first events alone take tens of
# KiB of the store's write-ahead log, and a step with a command's output hundreds.
MIN_FREE_BYTES = 1024 * 1024


class DataFolderFull(Exception):
    """The data folder's file system has no room for what had to be written there."""

    kind = "data_folder_full"

    def __init__(self, folder: Path, cause: str) -> None:
        self.folder = folder
        self.free = free_bytes(folder)
        free = "unknown" if self.free is None else f"{self.free:,} bytes"
        self.message = (
            f"the data folder {folder} is full ({cause}; free: {free}): free space there "
            "(or set OPENCOMPOSER_HOME to a folder with room), then retry"
        )
        super().__init__(self.message)


def is_full(exc: BaseException) -> bool:
    """Whether `exc` says the file system (or the user's quota) is out of room."""
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return code is not None and (code & 0xFF == _SQLITE_FULL or code == _SQLITE_IOERR_WRITE)
    return False


def full(folder: Path, exc: BaseException) -> DataFolderFull:
    """`exc` (for which `is_full` holds) as the data folder's error."""
    if isinstance(exc, OSError):
        cause = os.strerror(exc.errno) if exc.errno is not None else str(exc)
    else:
        cause = str(exc)
    return DataFolderFull(folder, cause)


def free_bytes(folder: Path) -> int | None:
    """Bytes this process may still write on the folder's file system (root may use the
    blocks kept back for it); None when the file system does not say."""
    try:
        info = os.statvfs(_existing(folder))
    except OSError:
        return None
    if info.f_blocks == 0:  # a file system that reports no sizes (some FUSE mounts)
        return None
    blocks = info.f_bfree if os.geteuid() == 0 else info.f_bavail
    return blocks * info.f_frsize


def ensure_room(folder: Path) -> None:
    """Refuse (DataFolderFull) to begin work that must be recorded when the folder's file
    system has less than MIN_FREE_BYTES free; quotas are not seen here, only when a write
    fails."""
    free = free_bytes(folder)
    if free is not None and free < MIN_FREE_BYTES:
        raise DataFolderFull(folder, f"less than {MIN_FREE_BYTES // 1024:,} KiB free")


def _existing(folder: Path) -> Path:
    """The folder, or its nearest existing parent (a data folder not made yet)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder
