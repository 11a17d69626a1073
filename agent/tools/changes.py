"""Applying file operations as one unit: checkpoint first, then write, and on a failure part
way through, put back what was already written.

Every tool that changes files (write, delete, move, edit, patch) ends here, so atomicity,
undo records and the diffs clients show are done once.
"""

import contextlib
import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from opencomposer.agent.protocol.items import FileChange, FileChangeKind
from opencomposer.agent.tools.beneath import PathChanged
from opencomposer.agent.tools.checkpoints import Change, CheckpointStore
from opencomposer.agent.tools.errors import UnexpectedEnvironment
from opencomposer.agent.tools.secret_files import is_secret_file
from opencomposer.agent.tools.textfile import BinaryFile, decode, lines_with_endings
from opencomposer.agent.tools.workspace import Image, Oversized, Workspace

# Diffs beyond this many characters are cut for clients (the file itself is complete).
MAX_DIFF_CHARS = 200_000


@dataclass(frozen=True)
class FileOp:
    kind: Literal["add", "update", "delete", "move"]
    path: Path
    before: Image
    after: Image
    """The bytes written, None for a delete; a move's is its `before` (the file moves as it
    is, even one too large to have been read)."""

    move_to: Path | None = None

    def checkpoint_changes(self) -> list[Change]:
        if self.kind == "move":
            assert self.move_to is not None
            # A secret file's contents stay out of checkpoints under its new name too.
            secret = is_secret_file(self.path) or is_secret_file(self.move_to)
            return [
                Change(self.path, self.before, None, secret),
                Change(self.move_to, None, self.after, secret),
            ]
        return [Change(self.path, self.before, self.after)]


async def apply_ops(
    ops: Sequence[FileOp],
    workspace: Workspace,
    checkpoints: CheckpointStore,
    call_id: str,
    turn_id: str | None,
) -> list[FileChange]:
    """Record, then perform, every op; all land or (as far as the disk allows) none."""
    checkpoints.record(call_id, turn_id, [c for op in ops for c in op.checkpoint_changes()])
    done: list[FileOp] = []
    for op in ops:
        try:
            await _perform(op, workspace)
        except (OSError, PathChanged) as exc:
            reverted = 0
            for earlier in reversed(done):
                # If this fails too, the checkpoint still holds the original for undo.
                with contextlib.suppress(OSError, PathChanged):
                    reverted += await _revert(earlier, workspace)
            rolled_back = f"{len(done)} earlier change(s) of this call were rolled back"
            if reverted < len(done):
                rolled_back = f"{reverted} of {rolled_back} (the others could not be)"
            if isinstance(exc, PathChanged):
                raise PathChanged(f"{workspace.relative(op.path)} ({rolled_back})") from None
            raise UnexpectedEnvironment(
                f"writing {workspace.relative(op.path)} failed ({exc.strerror or exc}); "
                f"{rolled_back}"
            ) from None
        done.append(op)
    return [describe(op, workspace) for op in ops]


async def _perform(op: FileOp, workspace: Workspace) -> None:
    writer = workspace.writer
    if op.kind == "delete":
        await writer.delete(op.path)
    elif op.kind == "move":
        assert op.move_to is not None
        await writer.move(op.path, op.move_to)
        if op.after != op.before:
            assert isinstance(op.after, bytes)
            await writer.write(op.move_to, op.after)
    else:
        assert isinstance(op.after, bytes)
        await writer.write(op.path, op.after)


async def _revert(op: FileOp, workspace: Workspace) -> bool:
    """Undo a performed op; False when its original was too large to have been read."""
    writer = workspace.writer
    if op.kind == "add":
        await writer.delete(op.path)
    elif op.kind == "move":
        assert op.move_to is not None
        await writer.move(op.move_to, op.path)
        if isinstance(op.before, bytes) and op.after != op.before:
            await writer.write(op.path, op.before)
    elif isinstance(op.before, bytes):
        await writer.write(op.path, op.before)
    else:
        return False
    return True


def describe(op: FileOp, workspace: Workspace) -> FileChange:
    return FileChange(
        path=workspace.relative(op.path),
        kind=FileChangeKind(op.kind),
        diff=unified_diff(
            op.before,
            op.after,
            workspace.relative(op.path),
            workspace.relative(op.move_to or op.path),
        ),
        move_to=workspace.relative(op.move_to) if op.move_to else None,
    )


def unified_diff(before: Image, after: Image, old_name: str, new_name: str) -> str:
    """A git-style unified diff of two text images; empty for binary content, or for a file
    too large to have been read."""
    if isinstance(before, Oversized) or isinstance(after, Oversized):
        return ""
    try:
        old = decode(before).text if before is not None else ""
        new = decode(after).text if after is not None else ""
    except BinaryFile:
        return ""
    lines = difflib.unified_diff(
        lines_with_endings(old),
        lines_with_endings(new),
        fromfile="/dev/null" if before is None else f"a/{old_name}",
        tofile="/dev/null" if after is None else f"b/{new_name}",
    )
    diff = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n[diff cut at {MAX_DIFF_CHARS:,} characters]\n"
    return diff
