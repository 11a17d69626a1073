"""`opencomposer bench tools`: the search tools on a large real tree, each beside a baseline.

The default tree is the Python standard library plus a few packages from this environment,
hard-linked into a scratch folder (well over a million lines). Each figure is the median of
several runs; the machine is shared, so compare ratios taken in one run, not figures across
runs.
"""

import asyncio
import functools
import os
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from opencomposer.agent.tools.code_index.symbol_index import SymbolIndex
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.search import list_workspace_files, ripgrep
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.bench.rows import Row
from opencomposer.config import ToolSettings
from opencomposer.paths import find_program

GREP_PATTERNS = [
    ("common word", "self", False),
    ("regex", r"class \w+Error\b", False),
    ("literal", "import os", True),
    ("absent", "zqxj_not_anywhere", True),
]
EXTRA_PACKAGES = ("pydantic", "fastapi", "starlette", "httpx", "rich", "typer", "openai")
_SKIP = shutil.ignore_patterns("__pycache__", "site-packages", "*.pyc")


def default_sources() -> dict[str, Path]:
    """The standard library and a few installed packages."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    sources = {"stdlib": Path(sysconfig.get_paths()["stdlib"])}
    sources.update(
        {f"packages/{name}": purelib / name for name in EXTRA_PACKAGES if (purelib / name).is_dir()}
    )
    return sources


def link_tree(sources: dict[str, Path], into: Path) -> Path:
    """Hard-link (or, across devices, copy) the sources into a scratch tree that the
    benchmark may modify without touching the originals."""

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    for name, source in sources.items():
        shutil.copytree(source, into / name, ignore=_SKIP, copy_function=link, symlinks=True)
    return into


def count_lines(files: list[Path]) -> int:
    total = 0
    for path in files:
        try:
            with path.open("rb") as handle:
                chunks = iter(lambda: handle.read(1 << 20), b"")
                total += sum(chunk.count(b"\n") for chunk in chunks)
        except OSError:
            continue
    return total


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def median_seconds_async(run: Callable[[], Awaitable[object]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def bench_grep(harness: ToolHarness, tree: Path, repeat: int) -> list[Row]:
    rg = str(ripgrep())
    rows = []
    for label, pattern, literal in GREP_PATTERNS:
        raw = ["-n", "--no-heading", *(["-F"] if literal else []), "-e", pattern, "."]
        # partial binds this iteration's arguments (a closure would see the loop's variables).
        baseline = median_seconds(
            functools.partial(subprocess.run, [rg, *raw], cwd=tree, stdout=subprocess.DEVNULL),
            repeat,
        )
        args = {"pattern": pattern, "literal": literal}
        outcome = await harness.call("grep", args)
        ours = await median_seconds_async(functools.partial(harness.call, "grep", args), repeat)
        rows.append(
            Row(
                f"grep: {label}",
                "rg",
                baseline,
                ours,
                "s",
                f"{outcome.fields.get('match_count', 0):,} matching lines",
            )
        )
    return rows


def bench_symbols(tree: Path, files: list[Path], repeat: int) -> list[Row]:
    index = SymbolIndex(tree, lambda: files)
    started = time.perf_counter()
    stats = index.build()
    build = time.perf_counter() - started
    ctags = find_program("ctags")
    baseline = None
    if ctags is not None:
        baseline = median_seconds(
            lambda: subprocess.run(
                [str(ctags), "-R", "-f", os.devnull, "."],
                cwd=tree,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
            1,
        )
    rows = [
        Row(
            "symbol index: full build",
            "ctags -R",
            baseline,
            build,
            "s",
            f"{stats.files:,} files, {stats.symbols:,} symbols",
        )
    ]

    # One typical source file changes; the watcher's update re-parses only that file.
    sizes = sorted((p.stat().st_size, p) for p in files if p.suffix == ".py")
    _, changed = sizes[len(sizes) * 3 // 4]
    original = changed.read_bytes()
    flips = iter(range(10**6))

    def edit_and_update() -> None:
        changed.write_bytes(original + f"\ndef bench_edit_{next(flips)}():\n    pass\n".encode())
        index.update([changed])

    # Hard links share content with the source tree: write a private copy first.
    changed.unlink()
    changed.write_bytes(original)
    try:
        update = median_seconds(edit_and_update, repeat * 2)
    finally:
        changed.write_bytes(original)
    lines = original.count(b"\n")
    rows.append(
        Row(
            "symbol index: update after one edit",
            "full build",
            build,
            update,
            "s",
            f"{changed.name}, {lines:,} lines; goal < 50 ms",
        )
    )
    return rows


async def bench_semantic(
    tree: Path, files: list[Path], models_dir: Path | None, data_dir: Path, sample: int, repeat: int
) -> list[Row]:
    from opencomposer.agent.tools.code_index.chunking import chunk_file, embedding_input
    from opencomposer.agent.tools.code_index.embedder import MiniLMEmbedder, find_model
    from opencomposer.agent.tools.code_index.semantic_index import SemanticIndex

    subset = [p for p in files if p.suffix == ".py"][:sample]
    model = find_model(models_dir) if models_dir else None
    embedder = MiniLMEmbedder.load(model) if model else None
    index = SemanticIndex(tree, lambda: subset, data_dir / "semantic.db", embedder)
    keywords = SemanticIndex(tree, lambda: subset, data_dir / "keywords.db", None)
    stats = await asyncio.to_thread(index.update)
    keyword_stats = await asyncio.to_thread(keywords.update)
    chunks = stats.chunks_added
    method = (
        "semantic"
        if embedder
        else "lexical (no model: `opencomposer models pull all-minilm-l6-v2`)"
    )
    rows = []
    if embedder is not None:
        texts = [
            embedding_input(c)
            for p in subset[:20]
            for c in chunk_file(p.relative_to(tree).as_posix(), p.read_text(errors="replace"))
        ]
        raw = median_seconds(lambda: embedder.encode(texts), 1) / max(len(texts), 1)
        rows.append(
            Row(
                "semantic index: build",
                "embedding alone",
                raw,
                stats.seconds / max(chunks, 1),
                "s/chunk",
                f"{chunks:,} chunks from {len(subset)} files: "
                f"{chunks / stats.seconds:.1f} chunks/s",
            )
        )
    else:
        rows.append(Row("semantic index: build", "", None, keyword_stats.seconds, "s", method))
    query = "parse a date string into a datetime object"
    semantic = median_seconds(lambda: index.search(query, 10), repeat)
    lexical = median_seconds(lambda: keywords.search(query, 10), repeat)
    rows.append(Row("semantic search: query", "BM25 query", lexical, semantic, "s", method))
    index.close()
    keywords.close()
    return rows


async def run_tool_bench(
    tree: Path | None, models_dir: Path | None, *, repeat: int = 5, semantic_files: int = 40
) -> tuple[list[Row], dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="opencomposer-bench-") as scratch:
        root = Path(scratch)
        sources = {tree.name: tree.resolve()} if tree else default_sources()
        tree = link_tree(sources, root / "tree")
        harness = ToolHarness(Workspace(tree), ToolSettings(), root / "data")
        try:
            files = await list_workspace_files(harness.workspace.root, harness.sandbox)
            rows = await bench_grep(harness, tree, repeat)
        finally:
            await harness.close()
        info = {
            "sources": {k: str(v) for k, v in sources.items()},
            "files": len(files),
            "lines": count_lines(files),
            "sandbox": harness.sandbox.name,
        }
        rows += await asyncio.to_thread(bench_symbols, tree, files, repeat)
        rows += await bench_semantic(tree, files, models_dir, root, semantic_files, repeat)
    return rows, info
