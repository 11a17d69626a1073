"""Opening paths beneath one folder without ever following a symbolic link.

Checking a resolved path and then opening it by name can be raced: in between, a command
can swap a folder on the path for a symlink to anywhere (`renameat2(RENAME_EXCHANGE)` in a
loop), and the open follows it. So nothing here opens a path by name. The root is opened
once; each folder on a path is opened relative to its parent's descriptor with
O_PATH|O_DIRECTORY|O_NOFOLLOW, and the last name is used with O_NOFOLLOW or an `*at` call on
its folder's descriptor: what openat2's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS guarantees, with
the system calls every Linux has. Callers give paths already resolved (symlinks followed
lexically, see `Workspace.resolve`), so a symlink met on the way means the tree changed
since: the operation is tried once more, then refused with `PathChanged`.

Only regular files are read: a FIFO, socket or device is refused from its `lstat` before
any open (a FIFO would block the server), and the descriptor's `fstat` is checked again.
A hard link is a second name for a file, not a path to it: reading one reads that file,
wherever its other names are (a sandboxed command cannot make one to a file outside the
workspace: the workspace is its own mount, and links across mounts fail), and writing one
replaces the name, leaving the file behind the other names as it was.
"""

import contextlib
import errno
import os
import secrets
import stat
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from typing import TypeVar

from opencomposer.agent.tools.errors import Denied

T = TypeVar("T")

_FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the type check opens without waiting for a writer, and
# is then refused by fstat.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathChanged(Denied):
    """A symlink appeared on a path that had none when it was resolved."""

    def __init__(self, shown: str) -> None:
        super().__init__(
            f"{shown}: the path changed while it was being opened (a folder or "
            "file on it became a symbolic link)",
            hint="Nothing was read or written there; check the path and retry.",
        )


class NotRegularFile(OSError):
    """A FIFO, socket or device node: never opened for reading."""


class FileTooLarge(OSError):
    def __init__(self, size: int) -> None:
        super().__init__(f"{size:,} bytes")
        self.size = size


class _Symlink(Exception):
    """Met a symlink during one attempt; `Tree._twice` refuses on the second."""


class Tree:
    """A folder opened once, and the file operations on paths beneath it: absolute paths
    under `root`, or relative ones, never with `..`, never followed through a symlink."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._prefix = os.path.join(os.fspath(root), "")
        self._fd = os.open(root, _FOLDER)
        weakref.finalize(self, os.close, self._fd)

    # ------------------------------------------------------------------ reading

    def lstat(self, path: PurePath) -> os.stat_result | None:
        """The file's own status; None when it, or a folder on the way, does not exist."""
        if not self._names(path):
            return os.fstat(self._fd)

        def attempt() -> os.stat_result | None:
            try:
                with self._parent(path) as (parent, name):
                    return _lstat(parent, name)
            except (FileNotFoundError, NotADirectoryError):
                return None

        return self._twice(path, attempt)

    def read(self, path: PurePath, limit: int) -> bytes:
        """A regular file's bytes. FileTooLarge over `limit` bytes (its size taken from the
        opened descriptor before a byte is read: a command chooses how large a file is, and
        a sparse one costs it nothing), IsADirectoryError for a folder, NotRegularFile for
        anything else that is not a regular file."""

        def attempt() -> bytes:
            with self._parent(path) as (parent, name):
                _regular(_lstat(parent, name))
                with os.fdopen(_open_at(parent, name, _READ), "rb") as handle:
                    size = _regular(os.fstat(handle.fileno())).st_size
                    if size > limit:
                        raise FileTooLarge(size)
                    data = handle.read(size + 1)
                    if len(data) > size:  # it grew since the fstat
                        data += handle.read(limit + 1 - len(data))
                        if len(data) > limit:
                            raise FileTooLarge(len(data))
                    return data

        return self._twice(path, attempt)

    # ------------------------------------------------------------------ writing

    def write(self, path: PurePath, data: bytes) -> None:
        """Replace or create the file atomically (a temporary file beside it, then a rename:
        a reader or a crash never sees half a file), creating missing folders. An existing
        file keeps its permission bits; a new one gets 0o666 less the umask, which the
        kernel applies to the mode given to open, as for any program's new file."""

        def attempt() -> None:
            with self._parent(path, create=True) as (parent, name):
                try:
                    existing = _lstat(parent, name)
                except FileNotFoundError:
                    existing = None
                if existing is not None and stat.S_ISDIR(existing.st_mode):
                    raise IsADirectoryError(errno.EISDIR, "Is a directory", name)
                # An existing file's content may be private: its new copy is 0600 until whole.
                temp = f".{name}.{secrets.token_hex(6)}.tmp"
                fd = os.open(temp, _CREATE, 0o666 if existing is None else 0o600, dir_fd=parent)
                try:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(data)
                        if existing is not None:
                            os.fchmod(fd, stat.S_IMODE(existing.st_mode))
                    os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(temp, dir_fd=parent)
                    raise

        self._twice(path, attempt)

    def unlink(self, path: PurePath) -> None:
        def attempt() -> None:
            with self._parent(path) as (parent, name):
                _lstat(parent, name)
                os.unlink(name, dir_fd=parent)

        self._twice(path, attempt)

    def rename(self, source: PurePath, target: PurePath) -> None:
        """Move a file, creating the target's missing folders."""

        def attempt() -> None:
            with (
                self._parent(source) as (old, old_name),
                self._parent(target, create=True) as (new, new_name),
            ):
                _lstat(old, old_name)
                os.rename(old_name, new_name, src_dir_fd=old, dst_dir_fd=new)

        self._twice(source, attempt)

    # ------------------------------------------------------------------ walking

    def _names(self, path: PurePath) -> list[str]:
        """The path's names below the root; Denied for a path not beneath it. On strings:
        pathlib's relative_to took a third of a small file's read (measured)."""
        text = os.fspath(path)
        if os.path.isabs(text):
            if text == self._prefix[:-1]:
                return []
            if not text.startswith(self._prefix):
                raise Denied(f"{path} is outside the workspace {self.root}")
            text = text[len(self._prefix) :]
        names = [name for name in text.split("/") if name not in ("", ".")]
        if ".." in names:
            raise Denied(f"{path} is not a resolved path (it has '..')")
        return names

    @contextlib.contextmanager
    def _parent(self, path: PurePath, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """A descriptor of the folder that holds the path's last name, and that name."""
        names = self._names(path)
        if not names:
            raise IsADirectoryError(errno.EISDIR, "Is the workspace root", str(self.root))
        fd = os.dup(self._fd)
        try:
            for name in names[:-1]:
                child = _folder(fd, name, create)
                os.close(fd)
                fd = child
            yield fd, names[-1]
        finally:
            os.close(fd)

    def _twice(self, path: PurePath, attempt: Callable[[], T]) -> T:
        """Run `attempt`, and once more when it met a symlink (a program replacing a folder
        has put it back a moment later); refuse when the second meets one too."""
        for _ in range(2):
            with contextlib.suppress(_Symlink):
                return attempt()
        try:
            shown = "/".join(self._names(path)) or "."
        except Denied:
            shown = str(path)
        raise PathChanged(shown)


def _folder(parent: int, name: str, create: bool) -> int:
    """A descriptor of the folder `name` in `parent`, made first when missing and asked to."""
    try:
        return _open_at(parent, name, _FOLDER)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, dir_fd=parent)
    return _open_at(parent, name, _FOLDER)


def _open_at(parent: int, name: str, flags: int) -> int:
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        # O_NOFOLLOW on a symlink: ELOOP, or ENOTDIR with O_DIRECTORY (as for a plain file).
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(parent, name):
            raise _Symlink() from None
        raise


def _is_symlink(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _lstat(parent: int, name: str) -> os.stat_result:
    info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        raise _Symlink()
    return info


def _regular(info: os.stat_result) -> os.stat_result:
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(errno.EINVAL, "Not a regular file")
    return info
