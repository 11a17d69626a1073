"""Search tools over ripgrep: grep (content) and glob (file names).

Both honour .gitignore (also outside git repositories), include hidden files but never
`.git`, and sort by path so the same workspace always gives the same answer (RL rollouts and
tests depend on it). Output is what models know from ripgrep itself (`path:line:text`, `-` for
context lines), capped, with totals for what was left out so the model can narrow the search.
"""

import asyncio
import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from pydantic import Field

from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.errors import InvalidArguments, UnexpectedEnvironment
from opencomposer.paths import find_program

MAX_LINE_CHARS = 500
MAX_GLOB_RESULTS = 500
_COMMON = ["--hidden", "--no-require-git", "--glob", "!.git", "--sort", "path"]


def ripgrep() -> Path:
    rg = find_program("rg")
    if rg is None:
        raise UnexpectedEnvironment("ripgrep (rg) is not installed",
                                    hint="Install the `ripgrep` wheel; `opencomposer doctor` checks it.")
    return rg


def list_workspace_files(root: Path) -> list[Path]:
    """Absolute paths of the files under `root` that ignore rules keep, sorted."""
    proc = subprocess.run([str(ripgrep()), "--files", *_COMMON, "--", "."], cwd=root,
                          capture_output=True, timeout=300)
    if proc.returncode not in (0, 1):
        raise UnexpectedEnvironment(f"ripgrep could not list files: "
                                    f"{proc.stderr.decode(errors='replace').strip()}")
    return [root / _display_path(line) for line in
            proc.stdout.decode("utf-8", "replace").splitlines()]


async def run_ripgrep(args: list[str], cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(ripgrep()), *args, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=2**24,
    )


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


class Grep(Tool):
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
        workspace = ctx.harness.workspace
        target = workspace.resolve(args.path)
        matcher = self._matcher(args)
        counts = await _count_matches(matcher, workspace.relative(target), workspace.root)
        total_matches, total_files = sum(counts.values()), len(counts)
        fields = {"query": args.pattern, "method": "grep", "match_count": total_matches,
                  "file_count": total_files, "truncated": total_matches > args.max_results}
        if not counts:
            where = _place(workspace.relative(target))
            return ToolResult(text=f"No matches for {args.pattern!r} in {where}.",
                              fields=fields)
        chosen, covered = [], 0
        for path in sorted(counts):
            chosen.append(path)
            covered += counts[path]
            if covered >= args.max_results:
                break
        lines, shown = await _print_matches(matcher, args.context, chosen, workspace.root,
                                            args.max_results)
        text = "\n".join(lines)
        if total_matches > shown:
            more_files = total_files - len(chosen)
            text += (f"\n[... {total_matches - shown:,} more matching lines"
                     + (f" in {more_files:,} more files" if more_files > 0 else "")
                     + "; narrow the search with path or glob]")
        return ToolResult(text=text, fields=fields)

    @staticmethod
    def _matcher(args: GrepArgs) -> list[str]:
        flags = ["--hidden", "--no-require-git", "--glob", "!.git"]
        flags.append({True: "--case-sensitive", False: "--ignore-case", None: "--smart-case"}[
            args.case_sensitive])
        if args.literal:
            flags.append("--fixed-strings")
        if args.glob:
            flags += ["--glob", args.glob]
        return [*flags, "-e", args.pattern]


async def _count_matches(matcher: list[str], target: str, root: Path) -> dict[str, int]:
    """Matching lines per file under `target` (relative to `root`), keyed by relative path."""
    proc = await run_ripgrep(["--count", "--with-filename", "--null", *matcher, "--", target],
                             root)
    out, err = await proc.communicate()
    if proc.returncode == 2 and not out:
        message = err.decode(errors="replace").strip().splitlines()
        raise InvalidArguments(
            f"ripgrep rejected the search: {message[-1] if message else proc.returncode}",
            hint="Fix the regular expression, or set literal=true to search plain text.")
    counts = {}
    for record in out.split(b"\n"):
        path, _, count = record.partition(b"\0")
        if count:
            counts[_display_path(os.fsdecode(path))] = int(count)
    return counts


async def _print_matches(matcher: list[str], context: int, paths: list[str], root: Path,
                         limit: int) -> tuple[list[str], int]:
    """ripgrep-style lines for the matches in `paths` (in that order), at most `limit`;
    groups of context lines are separated by `--` as ripgrep does."""
    around = ["--context", str(context)] if context else []
    proc = await run_ripgrep(["--json", *matcher, *around, "--", *paths], root)
    out, _ = await proc.communicate()
    by_file: dict[str, list[tuple[int, str, str]]] = {}
    for raw in out.splitlines():
        event = json.loads(raw)
        if event["type"] in ("match", "context"):
            data = event["data"]
            path = _display_path(_text(data["path"]))
            separator = ":" if event["type"] == "match" else "-"
            by_file.setdefault(path, []).append(
                (data["line_number"], separator, _clip(_text(data["lines"]))))
    lines, shown = [], 0
    for path in paths:
        previous = None
        for number, separator, text in by_file.get(path, []):
            if shown >= limit and separator == ":":
                return lines, shown
            if context and previous is not None and number > previous + 1:
                lines.append("--")
            lines.append(f"{path}{separator}{number}{separator}{text}")
            shown += separator == ":"
            previous = number
    return lines, shown


# --------------------------------------------------------------------------- glob


class GlobArgs(ToolArgs):
    pattern: str = Field(min_length=1)
    """Glob such as "**/*.py" or "src/*.ts"; a pattern without "/" matches file names at any
    depth."""

    path: str = "."
    """Folder to search in, relative to the workspace root."""


class Glob(Tool):
    name = "glob"
    description = (
        "Find files by glob pattern (respects .gitignore); lists paths with sizes, sorted by "
        "path. Use pattern \"*\" to list every file under path."
    )
    Args = GlobArgs
    view = "search"

    def view_fields(self, args: GlobArgs) -> dict[str, Any]:
        return {"query": args.pattern, "method": "glob"}

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        folder = workspace.resolve(args.path)
        if not folder.is_dir():
            raise InvalidArguments(f"{args.path} is not a folder",
                                   hint="Pass the folder to search in as path.")
        proc = await run_ripgrep(["--files", *_COMMON, "--glob", args.pattern, "--", "."], folder)
        out, err = await proc.communicate()
        if proc.returncode == 2:
            raise InvalidArguments(f"invalid glob {args.pattern!r}: {err.decode().strip()}")
        paths = [folder / _display_path(p) for p in out.decode("utf-8", "replace").splitlines()]
        fields = {"query": args.pattern, "method": "glob", "match_count": len(paths),
                  "file_count": len(paths), "truncated": len(paths) > MAX_GLOB_RESULTS}
        if not paths:
            where = _place(workspace.relative(folder))
            return ToolResult(text=f"No files match {args.pattern!r} in {where}.",
                              fields=fields)
        shown = [f"{workspace.relative(p)} ({_size(p)})" for p in paths[:MAX_GLOB_RESULTS]]
        text = "\n".join(shown)
        if len(paths) > MAX_GLOB_RESULTS:
            text += (f"\n[... {len(paths) - MAX_GLOB_RESULTS:,} more files; use a narrower "
                     "pattern or path]")
        return ToolResult(text=text, fields=fields)


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"
