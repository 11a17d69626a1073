"""The workspace: the one folder every tool call is confined to.

Paths are resolved (symlinks included) before use, so neither `../` nor a symlink pointing out
of the tree reaches outside it. Reads see the editor's unsaved buffers when a transport
provides them (the overlay); writes go through a `Writer`, which is the disk by default and
the editor (`workspace/applyEdit`) under LSP.
"""

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from opencomposer.agent.tools.errors import Denied, InvalidArguments, NotFound
from opencomposer.agent.tools.textfile import BinaryFile, TextFile, decode, new_file

# Larger files are not decoded whole; 128 MiB covers generated sources and logs users open.
MAX_TEXT_BYTES = 128 * 1024 * 1024


class Writer(Protocol):
    """Where file changes land."""

    async def write(self, path: Path, data: bytes) -> None: ...

    async def delete(self, path: Path) -> None: ...

    async def move(self, source: Path, target: Path) -> None: ...


class DiskWriter:
    """Atomic writes: a temporary file in the same folder, then a rename, so a reader or a
    crash never sees half a file. An existing file keeps its permission bits."""

    async def write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if path.exists() else None
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def delete(self, path: Path) -> None:
        path.unlink()

    async def move(self, source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(source, target)


class Workspace:
    def __init__(self, root: Path, writer: Writer | None = None,
                 overlay: Mapping[Path, str] | None = None) -> None:
        """`overlay`: unsaved editor text by resolved path, kept current by the transport."""
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise NotFound(f"workspace {root} is not a directory")
        self.root = resolved
        self.writer: Writer = writer or DiskWriter()
        self._overlay: Mapping[Path, str] = overlay if overlay is not None else {}

    # ------------------------------------------------------------------ paths

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free path for a workspace path; Denied when it escapes."""
        if not path or "\x00" in path:
            raise InvalidArguments(f"invalid path {path!r}")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise Denied(
                f"{path} is outside the workspace {self.root}",
                hint="Use a path relative to the workspace root.",
            )
        return resolved

    def relative(self, path: Path) -> str:
        """How a path is shown to the model and clients: relative, with forward slashes."""
        relative = path.relative_to(self.root).as_posix()
        return relative or "."

    # ------------------------------------------------------------------ reading

    def read_bytes(self, path: Path) -> bytes:
        if not path.exists():
            raise NotFound(f"{self.relative(path)} does not exist",
                           hint="Check the path with glob or grep.")
        if path.is_dir():
            raise InvalidArguments(f"{self.relative(path)} is a directory",
                                   hint="List it with glob instead.")
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise InvalidArguments(
                f"{self.relative(path)} is {size:,} bytes, over the {MAX_TEXT_BYTES:,}-byte "
                "limit for text tools", hint="Search it with grep instead.")
        return path.read_bytes()

    def read_text(self, path: Path) -> TextFile:
        """The file as text, the editor's unsaved buffer winning over the disk. Raises
        textfile.BinaryFile for binary content."""
        text = self._overlay.get(path)
        if text is not None:
            on_disk = decode(path.read_bytes()).format if path.is_file() else None
            return TextFile(text, on_disk) if on_disk else new_file(text)
        return decode(self.read_bytes(path))

    def unsaved(self) -> list[str]:
        """Files whose editor buffer differs from the disk, as shown paths: what a command,
        which reads the disk, does not see."""
        changed = []
        for path in self._overlay:
            try:
                on_disk = path.read_bytes() if path.is_file() else None
                differs = on_disk is None or decode(on_disk).text != self._overlay[path]
            except (OSError, BinaryFile):
                differs = True
            if differs and (path == self.root or self.root in path.parents):
                changed.append(self.relative(path))
        return sorted(changed)

    def current_bytes(self, path: Path) -> bytes | None:
        """What the file holds as the agent sees it (an unsaved buffer, encoded in the file's
        format), or None when it does not exist: the `before` of a change and what undo and
        edit outcomes compare with."""
        if path in self._overlay:
            return self.read_text(path).encode()
        return path.read_bytes() if path.is_file() else None
