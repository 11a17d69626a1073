"""Code-aware search tools: symbols (tree-sitter outlines and the workspace symbol index) and
semantic_search (embeddings, with a keyword fallback).

The indexes behind them are built on first use and kept fresh (see `indexes`).
"""

import asyncio
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.code_index.languages import language_for
from opencomposer.agent.tools.code_index.outline import Symbol, outline
from opencomposer.agent.tools.errors import InvalidArguments, NotFound
from opencomposer.agent.tools.workspace import Workspace

SEMANTIC_WAIT = 15.0
"""Seconds a search waits for the semantic index before answering from keywords."""

MAX_SYMBOLS = 200
PREVIEW_LINES = 6


def _symbol_line(symbol: Symbol, with_path: bool) -> str:
    where = f"{symbol.path}:{symbol.line}" if with_path else f"{symbol.line}-{symbol.end_line}"
    owner = f" (in {symbol.parent})" if symbol.parent and with_path else ""
    return f"{where} {symbol.kind} {symbol.name}{owner}: {symbol.signature}"


class SymbolsArgs(ToolArgs):
    path: str | None = None
    """A file: list its definitions. A folder: limit a query to it."""

    query: str | None = None
    """Find definitions by name anywhere (exact, prefix, initials like "gfn", substring)."""

    @model_validator(mode="after")
    def _something_to_do(self) -> "SymbolsArgs":
        if self.path is None and self.query is None:
            raise ValueError(
                "give a file path (for its outline) or a query (to find definitions by name)"
            )
        return self


class Symbols(Tool[SymbolsArgs]):
    name = "symbols"
    description = (
        "List the functions, classes and methods defined in a file (with line ranges), or find "
        "definitions by name across the workspace. Python, JS/TS, Go, Rust, Java, C/C++, Bash."
    )
    Args = SymbolsArgs
    view = "search"

    def view_fields(self, args: SymbolsArgs) -> dict[str, Any]:
        return {"query": args.query or args.path or "", "method": "symbols"}

    async def run(self, args: SymbolsArgs, ctx: ToolContext) -> ToolResult:
        workspace = ctx.harness.workspace
        target = workspace.resolve(args.path) if args.path else workspace.root
        shown = workspace.relative(target)
        if args.query is None:
            return self._outline(workspace, target, shown)
        index = await ctx.harness.indexes.symbols()
        prefix = None if target == workspace.root else shown
        found = index.search(args.query, limit=MAX_SYMBOLS, path_prefix=prefix)
        fields = {
            "query": args.query,
            "method": "symbols",
            "match_count": len(found),
            "truncated": len(found) == MAX_SYMBOLS,
        }
        if not found:
            return ToolResult(text=f"No definitions match {args.query!r}.", fields=fields)
        text = "\n".join(_symbol_line(s, with_path=True) for s in found)
        return ToolResult(text=text, fields=fields)

    def _outline(self, workspace: Workspace, path: Path, shown: str) -> ToolResult:
        if not workspace.is_file(path):
            raise NotFound(f"{shown} is not a file", hint="Give a file path, or a query.")
        language = language_for(path)
        if language is None:
            raise InvalidArguments(
                f"{shown} is not in a supported language", hint="Read it with read_file instead."
            )
        symbols = outline(shown, workspace.read_bytes(path), language.name)
        fields = {"query": shown, "method": "symbols", "match_count": len(symbols)}
        if not symbols:
            return ToolResult(
                text=f"{shown} defines no functions, classes or methods.", fields=fields
            )
        depth = {s.name: 0 for s in symbols if s.parent is None}
        lines = []
        for symbol in symbols:
            level = depth.get(symbol.parent, -1) + 1 if symbol.parent else 0
            depth.setdefault(symbol.name, level)
            lines.append("  " * level + _symbol_line(symbol, with_path=False))
        return ToolResult(text=f"{shown}:\n" + "\n".join(lines), fields=fields)


class SemanticSearchArgs(ToolArgs):
    query: str = Field(min_length=1)
    """What you are looking for, in words, e.g. "where the retry delay is computed"."""

    path: str | None = None
    """Limit the search to this folder or file."""

    top_k: int = Field(default=10, ge=1, le=50)
    """How many code chunks to return."""


class SemanticSearch(Tool[SemanticSearchArgs]):
    name = "semantic_search"
    description = (
        "Find code by meaning: returns the code chunks closest to a natural-language query. "
        "Use grep for exact names or text."
    )
    Args = SemanticSearchArgs
    view = "search"

    def view_fields(self, args: SemanticSearchArgs) -> dict[str, Any]:
        return {"query": args.query, "method": "semantic"}

    async def run(self, args: SemanticSearchArgs, ctx: ToolContext) -> ToolResult:
        harness, workspace = ctx.harness, ctx.harness.workspace
        prefix = None
        if args.path:
            target = workspace.resolve(args.path)
            prefix = None if target == workspace.root else workspace.relative(target)
        index, note = await harness.indexes.semantic(wait=SEMANTIC_WAIT)
        outcome = await asyncio.to_thread(index.search, args.query, args.top_k, prefix)
        note = note or outcome.note
        fields = {"query": args.query, "method": outcome.method, "match_count": len(outcome.hits)}
        lines = [f"[{outcome.method} search" + (f": {note}]" if note else "]")]
        for hit in outcome.hits:
            chunk = hit.chunk
            label = f" {chunk.symbol}" if chunk.symbol else ""
            lines.append(
                f"\n{chunk.path}:{chunk.start_line}-{chunk.end_line}{label} (score {hit.score:.3f})"
            )
            preview = chunk.text.splitlines()[:PREVIEW_LINES]
            lines += [f"  {line}" for line in preview]
            if chunk.end_line - chunk.start_line + 1 > PREVIEW_LINES:
                lines.append("  ...")
        if not outcome.hits:
            lines.append("No indexed code matches.")
        return ToolResult(text="\n".join(lines), fields=fields)
