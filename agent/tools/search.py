"""Search tools over ripgrep: grep (content) and glob (file names).

Both honour .gitignore (also outside git repositories), include hidden files but never
`.git`, and sort by path so the same workspace always gives the same answer (RL rollouts and
tests depend on it). Output is what models know from ripgrep itself (`path:line:text`, `-` for
context lines), capped, with totals for what was left out so the model can narrow the search.

ripgrep walks the tree by name, so a folder swapped for a symlink while it walks would lead it
out of the workspace; it therefore runs inside the command sandbox (network off, no
environment), where a race reaches nothing a command could not read anyway. What it prints is
read up to a bound: its JSON repeats each match, so one line of two megabytes of `a` made
gigabytes of output for the pattern `a` (1.1 GiB of server memory, measured).
"""

import asyncio
import base64
import contextlib
import json
import os
import shlex
import signal
import stat
from pathlib import Path
from typing import Any

from pydantic import Field

from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.errors import (
    InvalidArguments,
    NotFound,
    Timeout,
    ToolError,
    UnexpectedEnvironment,
)
from opencomposer.agent.tools.sandbox import Sandbox
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.paths import find_program

MAX_LINE_CHARS = 500
MAX_GLOB_RESULTS = 500
# Listing or searching the largest monorepos takes tens of seconds; a run still going after
# five minutes is stuck (the limit list_workspace_files always had).
RIPGREP_TIMEOUT = 300.0
# ripgrep's output read at most (the rest is cut at a line, and ripgrep stopped): far more than
# any answer shows, and a listing of 600,000 paths.
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
MAX_LISTING_BYTES = 64 * 1024 * 1024
_MAX_ERROR_BYTES = 64 * 1024
_COMMON = ["--hidden", "--no-require-git", "--glob", "!.git", "--sort", "path"]
# A shell's "command not found": the sandbox does not show ripgrep's folder.
_NOT_STARTED = 127


def ripgrep() -> Path:
    rg = find_program("rg")
    if rg is None:
        raise UnexpectedEnvironment(
            "ripgrep (rg) is not installed",
            hint="Install the `ripgrep` wheel; `opencomposer doctor` checks it.",
        )
    return rg


async def list_workspace_files(root: Path, sandbox: Sandbox) -> list[Path]:
    """Absolute paths of the files under `root` that ignore rules keep, sorted."""
    code, out, err = await run_ripgrep(
        ["--files", *_COMMON, "--", "."], root, sandbox, MAX_LISTING_BYTES
    )
    # 2 is also an error on some paths (unreadable, or gone while walked): the rest is listed.
    if code not in (0, 1, CUT) and not (code == 2 and out):
        raise UnexpectedEnvironment(
            f"ripgrep could not list files: {err.decode(errors='replace').strip()}"
        )
    return [root / _display_path(line) for line in out.decode("utf-8", "replace").splitlines()]


# The exit code run_ripgrep gives when it stopped ripgrep at its output limit.
CUT = -1


async def run_ripgrep(
    args: list[str], cwd: Path, sandbox: Sandbox, limit: int = MAX_OUTPUT_BYTES
) -> tuple[int, bytes, bytes]:
    """ripgrep's exit code, stdout and stderr, run in `sandbox` with the network off and an
    empty environment (no RIPGREP_CONFIG_PATH to change its flags). Past `limit` bytes of
    output ripgrep is stopped, its output cut after the last whole line, and the code is
    CUT."""
    rg = ripgrep()
    try:
        limits = sandbox.limits.open()
    except OSError as exc:
        raise UnexpectedEnvironment(
            f"could not put ripgrep under the sandbox's resource limits: {exc}"
        ) from None
    try:
        try:
            proc = await sandbox.spawn(
                shlex.join([str(rg), *args]),
                cwd=cwd,
                env={},
                network=False,
                stdin=False,
                limits=limits,
            )
        except OSError as exc:  # the folder to search in is gone
            raise NotFound(f"cannot search {cwd}: {exc.strerror or exc}") from None
        try:
            async with asyncio.timeout(RIPGREP_TIMEOUT):
                assert proc.stdout is not None and proc.stderr is not None
                errors = asyncio.ensure_future(_head_of(proc.stderr, _MAX_ERROR_BYTES))
                try:
                    out, cut = await _read_at_most(proc.stdout, limit)
                    if cut:  # it is writing on: it would never end, nor its stderr
                        _stop(proc)
                    err = await errors
                finally:
                    errors.cancel()
                await proc.wait()
        except BaseException as exc:  # timed out, or the call was cancelled: stop the search
            _stop(proc)
            await proc.wait()
            if isinstance(exc, TimeoutError):
                raise Timeout(
                    f"ripgrep did not finish within {RIPGREP_TIMEOUT:g} s",
                    hint="Narrow the search with path or glob.",
                ) from None
            raise
    finally:
        await limits.release()
    if proc.returncode == _NOT_STARTED:
        raise UnexpectedEnvironment(
            f"ripgrep ({rg}) could not start in the {sandbox.name} sandbox: "
            f"{err.decode(errors='replace').strip()}",
            hint="Install ripgrep where the sandbox shows it (the venv or a system folder).",
        )
    assert proc.returncode is not None
    if cut:
        return CUT, out[: out.rfind(b"\n") + 1], err
    return proc.returncode, out, err


async def _read_at_most(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    """What the stream gives, up to `limit` bytes; True when it had more."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(64 * 1024):
        if size + len(chunk) > limit:
            chunks.append(chunk[: limit - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


async def _head_of(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The stream's first `limit` bytes, the rest read and dropped (a writer blocked on a
    full pipe would never exit)."""
    head, _ = await _read_at_most(stream, limit)
    while await stream.read(64 * 1024):
        pass
    return head


def _stop(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: bwrap and all it runs


def _place(shown: str) -> str:
    return "the workspace" if shown == "." else shown


def _display_path(raw: str) -> str:
    return raw.removeprefix("./")


def _text(field: dict) -> str:
    if "text" in field:
        return field["text"]
    return base64.b64decode(field.get("bytes", "")).decode("utf-8", errors="replace")


def _clip(line: str) -> str:
    line = line.rstrip("\r\n")
    return line if len(line) <= MAX_LINE_CHARS else f"{line[:MAX_LINE_CHARS]} [...]"


# --------------------------------------------------------------------------- grep


class GrepArgs(ToolArgs):
    pattern: str = Field(min_length=1)
    """Regular expression (Rust regex syntax), or plain text when literal is true."""

    path: str = "."
    """File or folder to search, relative to the workspace root."""

    glob: str | None = None
    """Only search files matching this glob, e.g. "*.py" or "src/**/*.ts"."""

    case_sensitive: bool | None = None
    """Unset: case-insensitive unless the pattern has a capital letter."""

    context: int = Field(default=0, ge=0, le=20)
    """Lines of context to show before and after each match."""

    max_results: int = Field(default=100, ge=1, le=2000)
    """Most matching lines to return."""

    literal: bool = False
    """Treat the pattern as plain text, not a regular expression."""


class Grep(Tool[GrepArgs]):
    name = "grep"
    description = (
        "Search file contents with ripgrep (regex or literal), respecting .gitignore. Returns "
        "path:line:text lines, with totals when results are capped."
    )
    Args = GrepArgs
    view = "search"

    def view_fields(self, args: GrepArgs) -> dict[str, Any]:
        return {"query": args.pattern, "method": "grep"}

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        # Two passes keep ripgrep parallel yet the answer deterministic: count matches per
        # file (fast, unsorted), then print only the first files in path order that hold
        # max_results matches. Sorting a single pass (`--sort path`) would make ripgrep
        # single-threaded: 2x slower on the benchmark tree.
        workspace, sandbox = ctx.harness.workspace, ctx.harness.sandbox
        target = _searchable(workspace, args.path)
        matcher = self._matcher(args)
        counts = await _count_matches(matcher, workspace.relative(target), workspace.root, sandbox)
        total_matches, total_files = sum(counts.values()), len(counts)
        fields = {
            "query": args.pattern,
            "method": "grep",
            "match_count": total_matches,
            "file_count": total_files,
            "truncated": total_matches > args.max_results,
        }
        if not counts:
            where = _place(workspace.relative(target))
            return ToolResult(text=f"No matches for {args.pattern!r} in {where}.", fields=fields)
        chosen, covered = [], 0
        for path in sorted(counts):
            chosen.append(path)
            covered += counts[path]
            if covered >= args.max_results:
                break
        lines, shown, cut = await _print_matches(
            matcher, args.context, chosen, workspace.root, sandbox, args.max_results
        )
        text = "\n".join(lines)
        if cut:
            text += (
                f"\n[ripgrep's output passed {MAX_OUTPUT_BYTES:,} bytes (long lines) and was cut]"
            )
        if total_matches > shown:
            more_files = total_files - len(chosen)
            text += (
                f"\n[... {total_matches - shown:,} more matching lines"
                + (f" in {more_files:,} more files" if more_files > 0 else "")
                + "; narrow the search with path or glob]"
            )
        return ToolResult(text=text, fields=fields)

    @staticmethod
    def _matcher(args: GrepArgs) -> list[str]:
        flags = ["--hidden", "--no-require-git", "--glob", "!.git"]
        flags.append(
            {True: "--case-sensitive", False: "--ignore-case", None: "--smart-case"}[
                args.case_sensitive
            ]
        )
        if args.literal:
            flags.append("--fixed-strings")
        if args.glob:
            flags += ["--glob", args.glob]
        return [*flags, "-e", args.pattern]


def _searchable(workspace: Workspace, path: str) -> Path:
    """The folder or regular file grep searches (ripgrep would wait forever on a FIFO)."""
    target = workspace.resolve(path)
    info = workspace.stat(target)
    if info is None:
        raise NotFound(f"{path} does not exist", hint="Check the path with glob.")
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise InvalidArguments(f"{path} is not a regular file or a folder")
    return target


async def _count_matches(
    matcher: list[str], target: str, root: Path, sandbox: Sandbox
) -> dict[str, int]:
    """Matching lines per file under `target` (relative to `root`), keyed by relative path."""
    code, out, err = await run_ripgrep(
        ["--count", "--with-filename", "--null", *matcher, "--", target], root, sandbox
    )
    if code == 2 and not out:
        message = err.decode(errors="replace").strip().splitlines()
        raise InvalidArguments(
            f"ripgrep rejected the search: {message[-1] if message else code}",
            hint="Fix the regular expression, or set literal=true to search plain text.",
        )
    counts = {}
    for record in out.split(b"\n"):
        path, _, count = record.partition(b"\0")
        if count:
            counts[_display_path(os.fsdecode(path))] = int(count)
    return counts


async def _print_matches(
    matcher: list[str], context: int, paths: list[str], root: Path, sandbox: Sandbox, limit: int
) -> tuple[list[str], int, bool]:
    """ripgrep-style lines for the matches in `paths` (in that order), at most `limit`;
    groups of context lines are separated by `--` as ripgrep does. True when ripgrep's output
    was cut (`run_ripgrep`)."""
    around = ["--context", str(context)] if context else []
    code, out, _ = await run_ripgrep(["--json", *matcher, *around, "--", *paths], root, sandbox)
    cut = code == CUT
    by_file: dict[str, list[tuple[int, str, str]]] = {}
    for raw in out.splitlines():
        event = json.loads(raw)
        if event["type"] in ("match", "context"):
            data = event["data"]
            path = _display_path(_text(data["path"]))
            separator = ":" if event["type"] == "match" else "-"
            by_file.setdefault(path, []).append(
                (data["line_number"], separator, _clip(_text(data["lines"])))
            )
    lines: list[str] = []
    shown = 0
    for path in paths:
        previous = None
        for number, separator, text in by_file.get(path, []):
            if shown >= limit and separator == ":":
                return lines, shown, cut
            if context and previous is not None and number > previous + 1:
                lines.append("--")
            lines.append(f"{path}{separator}{number}{separator}{text}")
            shown += separator == ":"
            previous = number
    return lines, shown, cut


# --------------------------------------------------------------------------- glob


class GlobArgs(ToolArgs):
    pattern: str = Field(min_length=1)
    """Glob such as "**/*.py" or "src/*.ts"; a pattern without "/" matches file names at any
    depth."""

    path: str = "."
    """Folder to search in, relative to the workspace root."""


class Glob(Tool[GlobArgs]):
    name = "glob"
    description = (
        "Find files by glob pattern (respects .gitignore); lists paths with sizes, sorted by "
        'path. Use pattern "*" to list every file under path.'
    )
    Args = GlobArgs
    view = "search"

    def view_fields(self, args: GlobArgs) -> dict[str, Any]:
        return {"query": args.pattern, "method": "glob"}

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        folder = workspace.resolve(args.path)
        if not workspace.is_dir(folder):
            raise InvalidArguments(
                f"{args.path} is not a folder", hint="Pass the folder to search in as path."
            )
        code, out, err = await run_ripgrep(
            ["--files", *_COMMON, "--glob", args.pattern, "--", "."], folder, ctx.harness.sandbox
        )
        if code == 2:
            raise InvalidArguments(f"invalid glob {args.pattern!r}: {err.decode().strip()}")
        paths = [folder / _display_path(p) for p in out.decode("utf-8", "replace").splitlines()]
        fields = {
            "query": args.pattern,
            "method": "glob",
            "match_count": len(paths),
            "file_count": len(paths),
            "truncated": len(paths) > MAX_GLOB_RESULTS,
        }
        if not paths:
            where = _place(workspace.relative(folder))
            return ToolResult(text=f"No files match {args.pattern!r} in {where}.", fields=fields)
        shown = [
            f"{workspace.relative(p)} ({_size(workspace, p)})" for p in paths[:MAX_GLOB_RESULTS]
        ]
        text = "\n".join(shown)
        if code == CUT:
            text += f"\n[ripgrep's listing passed {MAX_OUTPUT_BYTES:,} bytes and was cut]"
        if len(paths) > MAX_GLOB_RESULTS:
            text += (
                f"\n[... {len(paths) - MAX_GLOB_RESULTS:,} more files; use a narrower "
                "pattern or path]"
            )
        return ToolResult(text=text, fields=fields)


def _size(workspace: Workspace, path: Path) -> str:
    try:
        info = workspace.stat(path)
    except (OSError, ToolError):  # unreadable, or swapped for a symlink since listed
        info = None
    if info is None:
        return "?"
    size: float = info.st_size
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"
