"""File tools: read_file, write_file, delete_file, move_file.

Reads number their lines (the form models cite back in edits) and stop at a line count or at
what fits the output cap, whichever comes first, always saying how to read on. Writes keep a
file's encoding, byte-order mark and line endings, and go through the harness so they are
checkpointed and undoable.
"""

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from opencomposer.agent.protocol.common import ActionClass, LineRange
from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.changes import FileOp
from opencomposer.agent.tools.errors import Conflict, Denied, InvalidArguments, NotFound
from opencomposer.agent.tools.terminal.git_guard import write_protection
from opencomposer.agent.tools.textfile import (
    BinaryFile,
    TextFile,
    decode,
    split_lines,
    to_file_newlines,
)
from opencomposer.agent.tools.workspace import Image, Workspace

MAX_LINE_CHARS = 2_000


def writable(workspace: Workspace, path: str) -> Path:
    """Resolve a path the agent may change: inside the workspace, outside `.git`, outside
    any other git directory and the hooks folder and config files git uses (what is written
    there runs on the host when the user runs git)."""
    resolved = workspace.resolve(path)
    hint = "Git's own files are the user's to change: ask them."
    if ".git" in resolved.relative_to(workspace.root).parts:
        raise Denied(f"{path} is inside .git", hint=hint)
    protection = write_protection(workspace.root, resolved)
    if protection is not None:
        raise Denied(f"{path} is {protection}", hint=hint)
    if resolved == workspace.root or resolved.is_dir():
        raise InvalidArguments(f"{path} is a directory")
    return resolved


def existing_file(workspace: Workspace, path: Path, shown: str, limit: int) -> Image:
    """The file as kept for undo (not decoded): its bytes, or only its size over `limit`."""
    if not workspace.is_file(path):
        raise NotFound(f"{shown} does not exist", hint="Check the path with glob.")
    image = workspace.current_bytes(path, limit)
    if image is None:  # gone since the check
        raise NotFound(f"{shown} does not exist", hint="Check the path with glob.")
    return image


def encode_as(document: TextFile, text: str, shown: str) -> bytes:
    """`text`, already in the file's line endings, in `document`'s encoding and BOM."""
    try:
        return document.with_text(text).encode()
    except UnicodeEncodeError as exc:
        raise InvalidArguments(
            f"{shown} is {document.format.encoding}, which cannot encode "
            f"{exc.object[exc.start : exc.end]!r}",
            hint="Use characters the file's encoding can hold.",
        ) from None


def encode_like(text: str, before: Image, shown: str) -> bytes:
    """Model-written content (`\\n` line endings) in the format of the file it replaces;
    UTF-8 for a new or binary file, or one too large to have been read."""
    if not isinstance(before, bytes):
        return text.encode("utf-8")
    try:
        old = decode(before)
    except BinaryFile:
        return text.encode("utf-8")
    return encode_as(old, to_file_newlines(text, old.format.newline), shown)


# --------------------------------------------------------------------------- read_file


class ReadFileArgs(ToolArgs):
    path: str
    """File path, relative to the workspace root."""

    offset: int = Field(default=1, ge=1)
    """First line to return (1-based)."""

    limit: int | None = Field(default=None, ge=1)
    """Most lines to return (default 2000)."""


class ReadFile(Tool[ReadFileArgs]):
    name = "read_file"
    description = (
        "Read a text file, with line numbers. Long files come in pages: pass offset and limit "
        "to read on. Binary files are described, not shown."
    )
    Args = ReadFileArgs
    view = "file_read"

    def view_fields(self, args: ReadFileArgs) -> dict[str, Any]:
        return {"path": args.path}

    async def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolResult:
        workspace, settings = ctx.harness.workspace, ctx.harness.settings
        path = workspace.resolve(args.path)
        shown = workspace.relative(path)
        try:
            document = workspace.read_text(path)
        except BinaryFile:
            info = workspace.stat(path)
            size = info.st_size if info is not None else 0
            return ToolResult(
                text=f"{shown} is a binary file ({size:,} bytes); it cannot be shown as text.",
                fields={"path": shown},
                data={"binary": True, "size": size},
            )
        lines = split_lines(document.text)
        total = len(lines)
        fields = {"path": shown, "total_lines": total, "encoding": document.format.label}
        if total == 0:
            return ToolResult(text=f"{shown} is empty.", fields=fields)
        if args.offset > total:
            raise InvalidArguments(
                f"offset {args.offset} is past the end of {shown} ({total} lines)"
            )
        wanted = args.limit or settings.read_lines
        budget = settings.output_cap * 9 // 10  # leave room for the header and footer
        numbered: list[str] = []
        used = 0
        for number in range(args.offset, min(total, args.offset - 1 + wanted) + 1):
            line = lines[number - 1]
            if len(line) > MAX_LINE_CHARS:
                cut = len(line) - MAX_LINE_CHARS
                line = f"{line[:MAX_LINE_CHARS]} [... {cut:,} more characters]"
            entry = f"{number:>6}\t{line}"
            if numbered and used + len(entry) + 1 > budget:
                break
            numbered.append(entry)
            used += len(entry) + 1
        last = args.offset + len(numbered) - 1
        text = "\n".join(numbered)
        if document.format.label != "utf-8":
            text = f"[{shown}: {document.format.label}]\n{text}"
        if last < total:
            text += f"\n[... {total - last:,} more lines; continue with offset={last + 1}]"
        fields["range"] = LineRange(start=args.offset, end=last)
        return ToolResult(text=text, fields=fields)


# --------------------------------------------------------------------------- write_file


class WriteFileArgs(ToolArgs):
    path: str
    """File path, relative to the workspace root; parent folders are created."""

    content: str
    """The complete new content of the file."""

    overwrite: bool = False
    """Must be true to replace an existing file (prefer edit_file for changes)."""


class WriteFile(Tool[WriteFileArgs]):
    name = "write_file"
    description = (
        "Create a file, or replace one entirely with overwrite=true. An existing file keeps "
        "its encoding and line endings. Prefer edit_file to change part of a file."
    )
    Args = WriteFileArgs
    view = "file_change"

    def action_class(self, args: ToolArgs) -> ActionClass:
        return ActionClass.writes_workspace

    def summary(self, args: WriteFileArgs) -> str:
        lines = len(split_lines(args.content))
        return f"write {args.path} ({lines} line{'s' if lines != 1 else ''})"

    async def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        path = writable(workspace, args.path)
        shown = workspace.relative(path)
        before = workspace.current_bytes(path, ctx.harness.settings.checkpoint_max_bytes)
        if before is not None and not args.overwrite:
            raise Conflict(
                f"{shown} already exists",
                hint="Set overwrite=true to replace it, or change it with edit_file.",
            )
        after = encode_like(args.content, before, shown)
        if after == before:
            return ToolResult(
                text=f"{shown} already has this content; nothing was written.",
                fields={"changes": []},
            )
        kind: Literal["add", "update"] = "add" if before is None else "update"
        changes = await ctx.harness.apply([FileOp(kind, path, before, after)], ctx)
        lines = len(split_lines(args.content))
        verb = "Created" if before is None else "Replaced"
        return ToolResult(text=f"{verb} {shown} ({lines} lines).", fields={"changes": changes})


# --------------------------------------------------------------------------- delete_file


class DeleteFileArgs(ToolArgs):
    path: str
    """File to delete, relative to the workspace root."""


class DeleteFile(Tool[DeleteFileArgs]):
    name = "delete_file"
    description = "Delete a file (undoable)."
    Args = DeleteFileArgs
    view = "file_change"

    def action_class(self, args: ToolArgs) -> ActionClass:
        return ActionClass.writes_workspace

    def summary(self, args: DeleteFileArgs) -> str:
        return f"delete {args.path}"

    async def run(self, args: DeleteFileArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        path = writable(workspace, args.path)
        shown = workspace.relative(path)
        before = existing_file(workspace, path, shown, ctx.harness.settings.checkpoint_max_bytes)
        changes = await ctx.harness.apply([FileOp("delete", path, before, None)], ctx)
        return ToolResult(text=f"Deleted {shown}.", fields={"changes": changes})


# --------------------------------------------------------------------------- move_file


class MoveFileArgs(ToolArgs):
    path: str
    """File to move, relative to the workspace root."""

    new_path: str
    """Where to move it; must not exist yet. Parent folders are created."""


class MoveFile(Tool[MoveFileArgs]):
    name = "move_file"
    description = "Move or rename a file within the workspace."
    Args = MoveFileArgs
    view = "file_change"

    def action_class(self, args: ToolArgs) -> ActionClass:
        return ActionClass.writes_workspace

    def summary(self, args: MoveFileArgs) -> str:
        return f"move {args.path} -> {args.new_path}"

    async def run(self, args: MoveFileArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        source = writable(workspace, args.path)
        target = writable(workspace, args.new_path)
        shown, shown_target = workspace.relative(source), workspace.relative(target)
        data = existing_file(workspace, source, shown, ctx.harness.settings.checkpoint_max_bytes)
        if workspace.stat(target) is not None:
            raise Conflict(
                f"{shown_target} already exists",
                hint="Pick another name, or delete the target first.",
            )
        changes = await ctx.harness.apply([FileOp("move", source, data, data, move_to=target)], ctx)
        return ToolResult(text=f"Moved {shown} to {shown_target}.", fields={"changes": changes})
