"""Search tools over ripgrep: grep (content) and glob (file names).

Both honour .gitignore (also outside git repositories), include hidden files but never
`.git`, and sort by path so the same workspace always gives the same answer (RL rollouts and
tests depend on it). Output is what models know from ripgrep itself (`path:line:text`, `-` for
context lines), capped, with totals for what was left out so the model can narrow the search.
"""

import asyncio
import base64
import json
from pathlib import Path

from pydantic import Field

from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.errors import InvalidArguments, UnexpectedEnvironment
from opencomposer.paths import find_program

MAX_LINE_CHARS = 500
MAX_GLOB_RESULTS = 500
_SUMMARY_END = b'"type":"summary"}'
_COMMON = ["--hidden", "--no-require-git", "--glob", "!.git", "--sort", "path"]


def ripgrep() -> Path:
    rg = find_program("rg")
    if rg is None:
        raise UnexpectedEnvironment("ripgrep (rg) is not installed",
                                    hint="Install the `ripgrep` wheel; `opencomposer doctor` checks it.")
    return rg


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

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        target = workspace.resolve(args.path)
        argv = ["--json", *_COMMON]
        argv.append({True: "--case-sensitive", False: "--ignore-case", None: "--smart-case"}[
            args.case_sensitive])
        if args.literal:
            argv.append("--fixed-strings")
        if args.context:
            argv += ["--context", str(args.context)]
        if args.glob:
            argv += ["--glob", args.glob]
        argv += ["-e", args.pattern, "--", str(target)]
        proc = await run_ripgrep(argv, workspace.root)
        lines, shown_matches, files = [], 0, []
        total_matches = total_files = 0
        last_path, last_line = None, 0
        assert proc.stdout is not None
        async for raw in proc.stdout:
            if shown_matches >= args.max_results and not raw.rstrip().endswith(_SUMMARY_END):
                continue  # past the cap only the summary's totals are needed
            event = json.loads(raw)
            kind, data = event["type"], event["data"]
            if kind == "summary":
                total_matches = data["stats"]["matched_lines"]
                total_files = data["stats"]["searches_with_match"]
            elif kind in ("match", "context"):
                path = workspace.relative(workspace.root / _display_path(_text(data["path"])))
                number = data["line_number"]
                if path != last_path:
                    files.append(path)
                elif args.context and number > last_line + 1:
                    lines.append("--")
                last_path, last_line = path, number
                separator = ":" if kind == "match" else "-"
                lines.append(f"{path}{separator}{number}{separator}{_clip(_text(data['lines']))}")
                shown_matches += kind == "match"
        stderr = (await proc.stderr.read()).decode(errors="replace").strip() if proc.stderr else ""
        code = await proc.wait()
        if code == 2 and not lines:
            raise InvalidArguments(
                f"ripgrep rejected the search: {stderr.splitlines()[-1] if stderr else code}",
                hint="Fix the regular expression, or set literal=true to search plain text.")
        fields = {"query": args.pattern, "method": "grep", "match_count": total_matches,
                  "file_count": total_files, "truncated": total_matches > shown_matches}
        if not lines:
            where = _place(workspace.relative(target))
            return ToolResult(text=f"No matches for {args.pattern!r} in {where}.", view="search",
                              fields=fields)
        text = "\n".join(lines)
        if total_matches > shown_matches:
            more_files = total_files - len(files)
            text += (f"\n[... {total_matches - shown_matches:,} more matching lines"
                     + (f" in {more_files:,} more files" if more_files > 0 else "")
                     + "; narrow the search with path or glob]")
        return ToolResult(text=text, view="search", fields=fields)


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
            return ToolResult(text=f"No files match {args.pattern!r} in {where}.", view="search",
                              fields=fields)
        shown = [f"{workspace.relative(p)} ({_size(p)})" for p in paths[:MAX_GLOB_RESULTS]]
        text = "\n".join(shown)
        if len(paths) > MAX_GLOB_RESULTS:
            text += (f"\n[... {len(paths) - MAX_GLOB_RESULTS:,} more files; use a narrower "
                     "pattern or path]")
        return ToolResult(text=text, view="search", fields=fields)


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
