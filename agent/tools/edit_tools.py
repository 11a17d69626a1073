"""Editing tools: edit_file (exact string replacement) and apply_patch (multi-file patches).

Both validate everything before anything touches the disk: a failed edit or an invalid patch
changes nothing and tells the model why, with the closest real lines. The file's encoding,
byte-order mark and line endings are kept.
"""

import dataclasses
import re
from pathlib import Path

from pydantic import Field, model_validator

from opencomposer.agent.protocol.common import ActionClass
from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.changes import FileOp
from opencomposer.agent.tools.editing.patch_format import PatchError
from opencomposer.agent.tools.editing.patch_parse import parse_patch
from opencomposer.agent.tools.editing.patch_plan import plan_patch
from opencomposer.agent.tools.editing.str_replace import Edit, EditError, apply_edits
from opencomposer.agent.tools.errors import Conflict, InvalidArguments
from opencomposer.agent.tools.files import encode_as, writable
from opencomposer.agent.tools.textfile import BinaryFile, TextFile, new_file, split_lines

SNIPPET_CONTEXT = 2
MAX_SNIPPETS = 3


class EditSpec(ToolArgs):
    old_string: str
    """Exact text to replace, including whitespace and indentation."""

    new_string: str
    """Replacement text."""

    replace_all: bool = False
    """Replace every occurrence instead of requiring exactly one."""


class EditFileArgs(ToolArgs):
    path: str
    """File to edit, relative to the workspace root."""

    old_string: str | None = None
    """Exact text to replace; it must occur exactly once unless replace_all is set."""

    new_string: str | None = None
    """Replacement text."""

    replace_all: bool = False
    """Replace every occurrence of old_string."""

    edits: list[EditSpec] | None = Field(default=None, min_length=1)
    """Several replacements applied in order, all or none (instead of old_string/new_string)."""

    @model_validator(mode="after")
    def _one_form(self) -> "EditFileArgs":
        single = self.old_string is not None or self.new_string is not None
        if single == (self.edits is not None):
            raise ValueError("give either old_string and new_string, or edits")
        if single and (self.old_string is None or self.new_string is None):
            raise ValueError("old_string and new_string go together")
        return self

    def as_edits(self) -> list[Edit]:
        if self.edits is not None:
            return [Edit(e.old_string, e.new_string, e.replace_all) for e in self.edits]
        assert self.old_string is not None and self.new_string is not None
        return [Edit(self.old_string, self.new_string, self.replace_all)]


class EditFile(Tool[EditFileArgs]):
    name = "edit_file"
    description = (
        "Replace exact text in a file (old_string -> new_string; old_string must be unique "
        "unless replace_all). Several edits in one call apply in order, all or none. On "
        "failure nothing changes and the closest real lines are shown."
    )
    Args = EditFileArgs
    view = "file_change"

    def action_class(self, args: ToolArgs) -> ActionClass:
        return ActionClass.writes_workspace

    def summary(self, args: EditFileArgs) -> str:
        edits = args.as_edits()
        first = edits[0]
        more = f" (+{len(edits) - 1} more)" if len(edits) > 1 else ""
        change = f"{_excerpt(first.old_string)} -> {_excerpt(first.new_string)}"
        return f"edit {args.path}: {change}{more}"

    async def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        path = writable(workspace, args.path)
        shown = workspace.relative(path)
        if not workspace.is_file(path):
            raise InvalidArguments(f"{shown} does not exist", hint="Create it with write_file.")
        try:
            document = workspace.read_text(path)
        except BinaryFile:
            raise InvalidArguments(
                f"{shown} is a binary file and cannot be edited as text"
            ) from None
        try:
            outcome = apply_edits(document.text, args.as_edits(), document.format.newline)
        except EditError as error:
            raise (
                Conflict
                if error.reason in ("no_match", "multiple_matches", "overlap")
                else InvalidArguments
            )(f"{shown}: {error.message}") from None
        after = encode_as(document, outcome.text, shown)
        changes = await ctx.harness.apply(
            [FileOp("update", path, workspace.current_bytes(path), after)], ctx
        )
        lines = split_lines(outcome.text)
        snippets = [
            _snippet(lines, first, last) for first, last in outcome.changed_lines[:MAX_SNIPPETS]
        ]
        text = [
            f"Edited {shown}: {outcome.replacements} replacement"
            f"{'s' if outcome.replacements != 1 else ''}.",
            *outcome.notes,
            *snippets,
        ]
        return ToolResult(text="\n".join(text), fields={"changes": changes})


def _snippet(lines: list[str], first: int, last: int) -> str:
    start, end = max(1, first - SNIPPET_CONTEXT), min(len(lines), last + SNIPPET_CONTEXT)
    return "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(start, end + 1))


class ApplyPatchArgs(ToolArgs):
    patch: str = Field(min_length=1)
    """A patch in the `*** Begin Patch` format (Add File / Update File / Delete File /
    Move to) or a unified diff (as `git diff` prints)."""


class ApplyPatch(Tool[ApplyPatchArgs]):
    name = "apply_patch"
    description = (
        "Apply a multi-file patch (*** Begin Patch envelope with Add/Update/Delete File and "
        "Move to, or a unified diff). The whole patch is checked before any file is written."
    )
    Args = ApplyPatchArgs
    view = "file_change"

    def action_class(self, args: ToolArgs) -> ActionClass:
        return ActionClass.writes_workspace

    def summary(self, args: ApplyPatchArgs) -> str:
        """The files the patch names, by what it does to each (read from its headers, so a
        patch that will not apply still says what it meant to do)."""
        actions = [f"{m[1].lower()} {m[2].strip()}" for m in _PATCH_HEADER.finditer(args.patch)]
        actions += [f"diff {m[1].strip()}" for m in _DIFF_HEADER.finditer(args.patch)]
        return (
            "apply patch: "
            + (", ".join(actions[:8]) or "(no file headers)")
            + (f" and {len(actions) - 8} more" if len(actions) > 8 else "")
        )

    async def run(self, args: ApplyPatchArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        documents: dict[Path, TextFile] = {}  # decoded once, encoded back in their format

        def read(path: str) -> str | None:
            resolved = writable(workspace, path)
            if not workspace.is_file(resolved):
                return None
            try:
                documents[resolved] = workspace.read_text(resolved)
                return documents[resolved].text
            except BinaryFile:
                raise PatchError(f"{path} is a binary file; patches apply to text", path) from None

        try:
            planned, notes = plan_patch(parse_patch(args.patch), read)
        except PatchError as error:
            raise InvalidArguments(
                error.message, hint="Re-read the files and regenerate the patch."
            ) from None
        ops = []
        for change in planned:
            path = writable(workspace, change.path)
            before = workspace.current_bytes(path)
            if change.new_text is None:
                after = None
            elif path in documents:
                after = encode_as(documents[path], change.new_text, change.path)
            else:
                after = new_file(change.new_text).encode()
            target = writable(workspace, change.move_to) if change.move_to else None
            if target is not None and workspace.stat(target) is not None:
                raise Conflict(f"{change.move_to} already exists")
            ops.append(FileOp(change.kind, path, before, after, move_to=target))
        changes = await ctx.harness.apply(ops, ctx)
        summary = ", ".join(
            f"{c.kind.value} {c.path}" + (f" -> {c.move_to}" if c.move_to else "") for c in changes
        )
        adjusted = [
            {"path": change.path, **dataclasses.asdict(adjustment)}
            for change in planned
            for adjustment in change.adjusted
        ]
        return ToolResult(
            text="\n".join([f"Applied patch: {summary}.", *notes]),
            fields={"changes": changes},
            data={"adjusted_hunks": adjusted},
        )


_PATCH_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.MULTILINE)
_DIFF_HEADER = re.compile(r"^\+\+\+ (?:b/)?(.+)$", re.MULTILINE)


def _excerpt(text: str, limit: int = 60) -> str:
    """A passage as one short quoted line, for an approval prompt."""
    lines = text.strip("\n").splitlines() or [""]
    shown = lines[0].strip()
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return repr(shown) + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")
