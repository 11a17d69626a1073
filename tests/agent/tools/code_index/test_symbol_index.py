"""The symbol index over a real temporary tree: build, ranking, incremental updates, and the
watcher applying changes made on disk while honouring ignore rules."""

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from fnmatch import fnmatch
from pathlib import Path

import pytest

from opencomposer.agent.tools.code_index import symbol_index
from opencomposer.agent.tools.code_index.languages import language_for
from opencomposer.agent.tools.code_index.outline import Symbol, outline
from opencomposer.agent.tools.code_index.symbol_index import IndexStats, SymbolIndex

FILES = {
    "src/app.py": (
        'GET_FILE = "get"\n'
        "\n"
        "\n"
        "def get_file(path):\n"
        "    return open(path)\n"
        "\n"
        "\n"
        "def get_file_name(path):\n"
        "    return path.name\n"
        "\n"
        "\n"
        "def get_files(root):\n"
        "    return []\n"
        "\n"
        "\n"
        "def reget_file():\n"
        '    return get_file("x")\n'
        "\n"
        "\n"
        "class HTTPServer:\n"
        "    def serve(self):\n"
        "        pass\n"
    ),
    "src/web/client.ts": (
        "export function getFileName(path: string): string {\n"
        "  return path;\n"
        "}\n"
        "\n"
        "export class HttpSession {\n"
        "  close(): void {}\n"
        "}\n"
    ),
    "lib/util.go": ("package lib\n\nfunc GetFile(path string) string { return path }\n"),
    "scripts/build.sh": "build() {\n  echo build\n}\n",
    "node_modules/pkg/index.js": "function get_file() {}\n",
    "generated/out.py": "def get_file():\n    pass\n",
    ".gitignore": "generated/\n",
    "README.md": "# get_file\n",
}


def gitignore_lister(root: Path) -> Callable[[], list[Path]]:
    """A stand-in for the ripgrep lister: leaves out .git/, node_modules/ and any path with a
    part matching a pattern of the root .gitignore."""

    def list_files() -> list[Path]:
        ignore = root / ".gitignore"
        patterns = [p.rstrip("/") for p in ignore.read_text().split()] if ignore.exists() else []
        return [
            path
            for path in sorted(root.rglob("*"))
            if path.is_file()
            and not any(
                part in (".git", "node_modules") or any(fnmatch(part, p) for p in patterns)
                for part in path.relative_to(root).parts
            )
        ]

    return list_files


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for relative, text in FILES.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path.resolve()


@pytest.fixture
def index(tree: Path) -> SymbolIndex:
    built = SymbolIndex(tree, gitignore_lister(tree))
    built.build()
    return built


def symbol(root: Path, relative: str, name: str) -> Symbol:
    """The symbol as the outline of the file on disk gives it."""
    spec = language_for(relative)
    assert spec is not None
    found = [
        s for s in outline(relative, (root / relative).read_bytes(), spec.name) if s.name == name
    ]
    assert len(found) == 1, found
    return found[0]


# ---------------------------------------------------------------------- build and search


def test_build_indexes_listed_supported_files(tree: Path) -> None:
    index = SymbolIndex(tree, gitignore_lister(tree))
    assert not index.ready
    stats = index.build()
    assert index.ready
    # app.py 7, client.ts 3, util.go 1, build.sh 1; node_modules, generated/ and README left out.
    assert stats == IndexStats(files=4, symbols=12, seconds=stats.seconds, parsed=4, too_large=0)
    app = (tree / "src/app.py").read_bytes()
    assert index.symbols_in(tree / "src/app.py") == outline("src/app.py", app, "python")
    assert index.symbols_in(Path("src/app.py")) == outline("src/app.py", app, "python")
    assert index.symbols_in(Path("generated/out.py")) == []


def test_search_ranks_exact_then_case_then_prefix_then_initials_then_substring(
    index: SymbolIndex, tree: Path
) -> None:
    assert index.search("get_file") == [
        symbol(tree, "src/app.py", "get_file"),  # exact
        symbol(tree, "src/app.py", "GET_FILE"),  # case-insensitive exact
        symbol(tree, "src/app.py", "get_file_name"),  # prefix, by line
        symbol(tree, "src/app.py", "get_files"),
        symbol(tree, "lib/util.go", "GetFile"),  # initials, by path
        symbol(tree, "src/web/client.ts", "getFileName"),
        symbol(tree, "src/app.py", "reget_file"),  # substring
    ]


def test_search_matches_word_initials_of_snake_and_camel_case(
    index: SymbolIndex, tree: Path
) -> None:
    assert index.search("gfn") == [
        symbol(tree, "src/app.py", "get_file_name"),
        symbol(tree, "src/web/client.ts", "getFileName"),
    ]
    assert index.search("HS") == [
        symbol(tree, "src/app.py", "HTTPServer"),
        symbol(tree, "src/web/client.ts", "HttpSession"),
    ]
    assert index.search("httpserver") == [symbol(tree, "src/app.py", "HTTPServer")]
    assert index.search("zzz") == []


def test_search_filters_by_path_prefix_and_limits(index: SymbolIndex, tree: Path) -> None:
    name_in_ts = symbol(tree, "src/web/client.ts", "getFileName")
    assert index.search("file", path_prefix="src/web") == [name_in_ts]
    assert index.search("file", path_prefix="./src/web/") == [name_in_ts]
    assert index.search("file", path_prefix="src/web/client.ts") == [name_in_ts]
    assert index.search("file", path_prefix="src/we") == []
    assert index.search("get_file", limit=2) == [
        symbol(tree, "src/app.py", "get_file"),
        symbol(tree, "src/app.py", "GET_FILE"),
    ]
    assert index.search("", limit=3) == [
        symbol(tree, "lib/util.go", "GetFile"),
        symbol(tree, "scripts/build.sh", "build"),
        symbol(tree, "src/app.py", "GET_FILE"),
    ]
    assert index.search("get", limit=0) == []


# ---------------------------------------------------------------------- updates


def test_update_applies_modified_deleted_and_created_files(index: SymbolIndex, tree: Path) -> None:
    (tree / "src/app.py").write_text("def renamed():\n    pass\n")
    (tree / "lib/util.go").unlink()
    (tree / "src/new.py").write_text("class Fresh:\n    pass\n")
    stats = index.update(
        changed=[tree / "src/app.py", tree / "src/new.py", tree / "README.md"],
        deleted=[tree / "lib/util.go"],
    )
    assert stats == IndexStats(files=4, symbols=6, seconds=stats.seconds, parsed=2, too_large=0)
    assert index.search("get_file") == [symbol(tree, "src/web/client.ts", "getFileName")]
    assert index.search("renamed") == [symbol(tree, "src/app.py", "renamed")]
    assert index.search("Fresh") == [symbol(tree, "src/new.py", "Fresh")]


def test_update_drops_a_changed_file_that_is_gone(index: SymbolIndex, tree: Path) -> None:
    (tree / "scripts/build.sh").unlink()
    stats = index.update(changed=[tree / "scripts/build.sh"])
    assert (stats.files, stats.symbols, stats.parsed) == (3, 11, 0)
    assert index.search("build") == []


def test_update_skips_files_whose_content_did_not_change(index: SymbolIndex, tree: Path) -> None:
    indexed = [
        tree / relative
        for relative in ("src/app.py", "src/web/client.ts", "lib/util.go", "scripts/build.sh")
    ]
    for path in indexed:  # new mtimes, same bytes
        path.write_bytes(path.read_bytes())
    stats = index.update(changed=indexed)
    assert stats == IndexStats(files=4, symbols=12, seconds=stats.seconds, parsed=0, too_large=0)


def test_files_over_the_size_limit_are_counted_not_parsed(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(symbol_index, "MAX_FILE_BYTES", 200)  # only app.py (331 bytes) is over
    index = SymbolIndex(tree, gitignore_lister(tree))
    stats = index.build()
    assert stats == IndexStats(files=3, symbols=5, seconds=stats.seconds, parsed=3, too_large=1)
    assert index.symbols_in(Path("src/app.py")) == []


# ---------------------------------------------------------------------- watching


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "the index did not reflect the change in time"
        await asyncio.sleep(0.02)


@asynccontextmanager
async def watching(index: SymbolIndex) -> AsyncIterator[None]:
    """Runs index.watch, entered once the watcher demonstrably sees changes: a probe file is
    rewritten until it is indexed (events before the watcher starts are lost), then removed."""
    stop = asyncio.Event()
    task = asyncio.create_task(index.watch(stop, debounce_ms=10))
    probe = index.root / "probe.py"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while not index.search("watcher_probe"):
        assert loop.time() < deadline, "the watcher never started"
        probe.write_text("def watcher_probe():\n    pass\n")
        await asyncio.sleep(0.05)
    probe.unlink()
    await eventually(lambda: not index.search("watcher_probe"))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_watch_applies_changes_made_on_disk(index: SymbolIndex, tree: Path) -> None:
    async with watching(index):
        app = tree / "src/app.py"
        app.write_text(app.read_text() + "\n\ndef added_later():\n    pass\n")
        await eventually(
            lambda: index.search("added_later") == [symbol(tree, "src/app.py", "added_later")]
        )

        (tree / "lib/util.go").unlink()
        await eventually(lambda: index.search("GetFile", path_prefix="lib") == [])

        (tree / "src/pkg").mkdir()
        (tree / "src/pkg/fresh.py").write_text("def fresh_start():\n    pass\n")
        await eventually(
            lambda: index.search("fresh_start") == [symbol(tree, "src/pkg/fresh.py", "fresh_start")]
        )


async def test_watch_leaves_ignored_files_out(tree: Path) -> None:
    listings: list[list[Path]] = []
    lister = gitignore_lister(tree)

    def list_files() -> list[Path]:
        listings.append(lister())
        return listings[-1]

    index = SymbolIndex(tree, list_files)
    index.build()

    async def write_ignored_files_then_a_control() -> None:
        (tree / "node_modules/pkg/new.js").write_text("function ignored_dependency() {}\n")
        (tree / "generated/new.py").write_text("def ignored_output():\n    pass\n")
        (tree / "src/control.py").write_text("def control():\n    pass\n")
        await eventually(
            lambda: index.search("control") == [symbol(tree, "src/control.py", "control")]
        )
        assert index.search("ignored") == []
        (tree / "src/control.py").unlink()
        await eventually(lambda: index.search("control") == [])

    async with watching(index):
        await write_ignored_files_then_a_control()
        listed = len(listings)
        await write_ignored_files_then_a_control()
        # No re-listing the second time: generated/new.py is remembered as ignored and
        # src/control.py as listed.
        assert len(listings) == listed


async def test_watch_follows_gitignore_edits(index: SymbolIndex, tree: Path) -> None:
    async with watching(index):
        (tree / ".gitignore").write_text("generated/\napp.py\n")
        await eventually(lambda: index.search("HTTPServer") == [])
        assert index.symbols_in(Path("src/app.py")) == []

        (tree / ".gitignore").write_text("")
        await eventually(
            lambda: (
                index.search("get_file", path_prefix="generated")
                == [symbol(tree, "generated/out.py", "get_file")]
            )
        )
        assert index.search("HTTPServer") == [symbol(tree, "src/app.py", "HTTPServer")]


async def test_watch_indexes_a_folder_moved_in(
    index: SymbolIndex, tree: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "vendor").mkdir()
    (outside / "vendor/moved.py").write_text("def moved_in():\n    pass\n")
    async with watching(index):
        os.rename(outside / "vendor", tree / "vendor")
        await eventually(
            lambda: index.search("moved_in") == [symbol(tree, "vendor/moved.py", "moved_in")]
        )
        os.rename(tree / "vendor", outside / "vendor")
        await eventually(lambda: index.search("moved_in") == [])
