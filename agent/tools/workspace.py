"""The workspace: the one folder every tool call is confined to.

A path is named by resolving it (symlinks followed, so a symlink inside the tree to another
file inside it works) and refused when the name falls outside the root. Every read, write,
stat, delete and move then goes through `beneath.Tree`, which walks the resolved name from a
descriptor of the root opened once and never follows a symlink: a folder swapped for a
symlink between the check and the use is refused, not followed. Reads see the editor's
unsaved buffers when a transport provides them (the overlay); writes go through a `Writer`,
which is the disk by default and the editor (`workspace/applyEdit`) under LSP.
"""

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from opencomposer.agent.tools.beneath import FileTooLarge, NotRegularFile, PathChanged, Tree
from opencomposer.agent.tools.errors import (
    Denied,
    InvalidArguments,
    NotFound,
    ToolError,
    UnexpectedEnvironment,
)
from opencomposer.agent.tools.textfile import BinaryFile, TextFile, decode, new_file

# Larger files are not decoded whole; 128 MiB covers generated sources and logs users open.
MAX_TEXT_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Oversized:
    """A file's content left unread because it is larger than the reader's limit: only its
    size (apparent: a sparse file counts whole) is known."""

    size: int


Image = bytes | None | Oversized
"""What a file holds, as a checkpoint or a comparison sees it: its bytes, None for no file,
or its size alone."""


class Writer(Protocol):
    """Where file changes land."""

    async def write(self, path: Path, data: bytes) -> None: ...

    async def delete(self, path: Path) -> None: ...

    async def move(self, source: Path, target: Path) -> None: ...


class DiskWriter:
    """Changes on disk, beneath the workspace's root descriptor (`Tree` says how: atomic
    writes, permission bits kept, symlinks refused)."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree

    async def write(self, path: Path, data: bytes) -> None:
        self.tree.write(path, data)

    async def delete(self, path: Path) -> None:
        self.tree.unlink(path)

    async def move(self, source: Path, target: Path) -> None:
        self.tree.rename(source, target)


class Workspace:
    def __init__(
        self, root: Path, writer: Writer | None = None, overlay: Mapping[Path, str] | None = None
    ) -> None:
        """`overlay`: unsaved editor text by resolved path, kept current by the transport."""
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise NotFound(f"workspace {root} is not a directory")
        self.root = resolved
        self.tree = Tree(resolved)
        self.writer: Writer = writer or DiskWriter(self.tree)
        self._overlay: Mapping[Path, str] = overlay if overlay is not None else {}

    # ------------------------------------------------------------------ paths

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free path for a workspace path; Denied when it escapes."""
        if not path or "\x00" in path:
            raise InvalidArguments(f"invalid path {path!r}")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = self._resolve(candidate, path)
        if not self.contains(resolved):
            raise Denied(
                f"{path} is outside the workspace {self.root}",
                hint="Use a path relative to the workspace root.",
            )
        return resolved

    def _resolve(self, candidate: Path, shown: str) -> Path:
        """Symlinks followed by name. Path.resolve fails (EINVAL from readlink) when a link
        it saw is replaced by a file or folder before it reads it: once more, then refused."""
        for _ in range(2):
            try:
                return candidate.resolve()
            except RuntimeError:  # Python 3.11's "Symlink loop from ..."
                raise InvalidArguments(f"{shown}: its symbolic links form a loop") from None
            except OSError:
                continue
        raise PathChanged(shown)

    def contains(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def relative(self, path: Path) -> str:
        """How a path is shown to the model and clients: relative, with forward slashes."""
        relative = path.relative_to(self.root).as_posix()
        return relative or "."

    # ------------------------------------------------------------------ status

    def stat(self, path: Path) -> os.stat_result | None:
        """The file's own status (a symlink is never followed); None when it does not
        exist."""
        return self.tree.lstat(path)

    def is_file(self, path: Path) -> bool:
        info = self.stat(path)
        return info is not None and stat.S_ISREG(info.st_mode)

    def is_dir(self, path: Path) -> bool:
        info = self.stat(path)
        return info is not None and stat.S_ISDIR(info.st_mode)

    # ------------------------------------------------------------------ reading

    def read_bytes(self, path: Path, limit: int = MAX_TEXT_BYTES) -> bytes:
        """A regular file's bytes, refusing with a typed error what is missing, a folder, a
        FIFO, socket or device, or over `limit` bytes."""
        data = self._read(path, limit)
        if isinstance(data, Oversized):
            raise InvalidArguments(
                f"{self._shown(path)} is {data.size:,} bytes, over the {limit:,}-byte limit "
                "for text tools",
                hint="Search it with grep instead.",
            )
        return data

    def _read(self, path: Path, limit: int) -> bytes | Oversized:
        """The bytes, or the size of a file over `limit`, judged on the opened descriptor
        before anything is read (`Tree.read`)."""
        shown = self._shown(path)
        try:
            return self.tree.read(path, limit)
        except FileTooLarge as exc:
            return Oversized(exc.size)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(
                f"{shown} does not exist", hint="Check the path with glob or grep."
            ) from None
        except IsADirectoryError:
            raise InvalidArguments(
                f"{shown} is a directory", hint="List it with glob instead."
            ) from None
        except NotRegularFile:
            raise InvalidArguments(
                f"{shown} is not a regular file (a FIFO, socket or device)",
                hint="Only regular files can be read.",
            ) from None
        except OSError as exc:
            raise UnexpectedEnvironment(f"reading {shown} failed: {exc.strerror or exc}") from None

    def _shown(self, path: Path) -> str:
        return self.relative(path) if self.contains(path) else str(path)

    def read_text(self, path: Path) -> TextFile:
        """The file as text, the editor's unsaved buffer winning over the disk. Raises
        textfile.BinaryFile for binary content."""
        text = self._overlay.get(path)
        if text is not None:
            on_disk = self._disk_bytes(path)
            return TextFile(text, decode(on_disk).format) if on_disk is not None else new_file(text)
        return decode(self.read_bytes(path))

    def unsaved(self) -> list[str]:
        """Files whose editor buffer differs from the disk, as shown paths: what a command,
        which reads the disk, does not see."""
        changed = []
        for path in self._overlay:
            if not self.contains(path):
                continue
            try:
                on_disk = self._disk_bytes(path)
                differs = on_disk is None or decode(on_disk).text != self._overlay[path]
            except (ToolError, BinaryFile):
                differs = True
            if differs:
                changed.append(self.relative(path))
        return sorted(changed)

    def current_bytes(self, path: Path, limit: int = MAX_TEXT_BYTES) -> Image:
        """What the file holds as the agent sees it (an unsaved buffer, encoded in the file's
        format), None when it does not exist, or only its size when that is over `limit`
        (nothing of it is read): the `before` of a change and what undo and edit outcomes
        compare with. A command decides how large a file is, so no caller reads one whole."""
        if path in self._overlay:
            data = self.read_text(path).encode()
            return Oversized(len(data)) if len(data) > limit else data
        return self._read(path, limit) if self.is_file(path) else None

    def _disk_bytes(self, path: Path) -> bytes | None:
        """The file on disk (at most MAX_TEXT_BYTES), None when there is no regular file."""
        return self.read_bytes(path) if self.is_file(path) else None
