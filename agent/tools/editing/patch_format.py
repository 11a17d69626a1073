"""The data apply_patch's engine hands between its two steps: patch_parse reads a patch into
FileOps (an update carrying its Hunks), and patch_plan turns those into PlannedChanges against
the current files, all before anything is written. Either step refuses a patch by raising
PatchError, whose message is written for the model.
"""

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Hunk:
    lines: list[tuple[str, str]]
    """(op, text) pairs, op being " " (context), "-" (removed) or "+" (added)."""

    anchors: list[str] = field(default_factory=list)
    """Codex `@@ line` anchors, outermost first: the hunk lies after these lines, in order."""

    hint: int | None = None
    """Unified diffs: the 0-based old line the `@@` header puts the hunk at."""

    at_end: bool = False
    """The hunk must end where the file ends (`*** End of File`, or a no-newline marker)."""

    final_newline: bool | None = None
    """Whether the new file ends with a line break, when a no-newline marker says."""

    patch_line: int = 0


@dataclass(frozen=True)
class AddFile:
    path: str
    content: str


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class UpdateFile:
    path: str
    chunks: list[Hunk]
    move_to: str | None = None


FileOp = AddFile | DeleteFile | UpdateFile


@dataclass(frozen=True)
class HunkAdjustment:
    """A hunk that did not match where or as it was written, applied anyway: said to the model
    and to clients, since a unified diff with wrong line numbers may have meant another
    place."""

    hunk: int
    """1-based, among the hunks of its file."""

    header_line: int | None
    """The line of the file its `@@ -l` header names; None when it names none."""

    applied_line: int
    """The line of the file (before the patch) where its first line matched."""

    ignored_whitespace: bool = False
    """It matched only after ignoring trailing whitespace."""


@dataclass(frozen=True)
class PlannedChange:
    path: str
    kind: Literal["add", "update", "delete", "move"]
    """"move" when an update has a new path (its content may change too)."""

    old_text: str | None
    """The file's current text; None for an add."""

    new_text: str | None
    """None for a delete."""

    move_to: str | None = None

    adjusted: tuple[HunkAdjustment, ...] = ()
    """Hunks applied elsewhere than their header's line, or with fuzz."""


class PatchError(Exception):
    """A patch that cannot be parsed or applied; `message` is complete text for the model."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        """The file the error is about, when it is about one."""
