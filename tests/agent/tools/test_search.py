"""grep and glob over ripgrep: ignore rules, caps with totals, and stable order."""

import subprocess
from pathlib import Path

import pytest

from opencomposer.agent.tools.search import MAX_GLOB_RESULTS
from opencomposer.paths import find_program


@pytest.fixture
def tree(root: Path) -> Path:
    files = {
        "src/app.py": "def main():\n    return helper()\n\n\ndef helper():\n    return 42\n",
        "src/util.py": "# TODO: tidy\nMAIN = 'x'\n",
        "docs/ünïcode name.md": "main entry point\n",
        ".github/workflows/ci.yml": "run: main\n",
        "build/out.py": "def main(): pass\n",
        "node_modules/dep/index.js": "function main() {}\n",
        ".gitignore": "build/\nnode_modules/\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


async def test_grep_honours_gitignore_and_sorts_by_path(harness, tree):
    outcome = await harness.call("grep", {"pattern": "main"})
    assert outcome.text.splitlines() == [
        ".github/workflows/ci.yml:1:run: main",
        "docs/ünïcode name.md:1:main entry point",
        "src/app.py:1:def main():",
        "src/util.py:2:MAIN = 'x'",  # smart case: lower-case pattern ignores case
    ]
    assert outcome.fields == {
        "query": "main",
        "method": "grep",
        "match_count": 4,
        "file_count": 4,
        "truncated": False,
    }


async def test_grep_options(harness, tree):
    sensitive = await harness.call(
        "grep", {"pattern": "main", "case_sensitive": True, "glob": "*.py"}
    )
    assert sensitive.text == "src/app.py:1:def main():"
    context = await harness.call("grep", {"pattern": "helper", "path": "src/app.py", "context": 1})
    assert context.text.splitlines() == [
        "src/app.py-1-def main():",
        "src/app.py:2:    return helper()",
        "src/app.py-3-",
        "src/app.py-4-",
        "src/app.py:5:def helper():",
        "src/app.py-6-    return 42",
    ]
    literal = await harness.call("grep", {"pattern": "helper()", "literal": True})
    assert literal.text == "src/app.py:2:    return helper()\nsrc/app.py:5:def helper():"
    nothing = await harness.call("grep", {"pattern": "zebra"})
    assert (nothing.ok, nothing.text) == (True, "No matches for 'zebra' in the workspace.")


async def test_grep_caps_results_and_counts_the_rest(harness, root: Path):
    for i in range(30):
        (root / f"f{i:02d}.txt").write_text("hit\n" * 5)
    outcome = await harness.call("grep", {"pattern": "hit", "max_results": 12})
    lines = outcome.text.splitlines()
    assert lines[:12] == [f"f0{i // 5}.txt:{i % 5 + 1}:hit" for i in range(10)] + [
        "f02.txt:1:hit",
        "f02.txt:2:hit",
    ]
    assert lines[12] == (
        "[... 138 more matching lines in 27 more files; narrow the search with path or glob]"
    )
    assert outcome.fields["truncated"] is True and outcome.fields["match_count"] == 150


async def test_grep_bad_regex_and_paths(harness, tree):
    bad = await harness.call("grep", {"pattern": "(unclosed"})
    assert bad.error.kind == "invalid_arguments" and "literal=true" in bad.text
    outside = await harness.call("grep", {"pattern": "x", "path": "/etc"})
    assert outside.error.kind == "denied"
    empty = await harness.call("grep", {"pattern": ""})
    assert empty.error.kind == "invalid_arguments"


async def test_glob_lists_with_sizes(harness, tree):
    outcome = await harness.call("glob", {"pattern": "*.py"})
    assert outcome.text.splitlines() == ["src/app.py (62 B)", "src/util.py (24 B)"]
    scoped = await harness.call("glob", {"pattern": "*", "path": "docs"})
    assert scoped.text == "docs/ünïcode name.md (17 B)"
    assert (
        await harness.call("glob", {"pattern": "*.rs"})
    ).text == "No files match '*.rs' in the workspace."
    not_folder = await harness.call("glob", {"pattern": "*", "path": "src/app.py"})
    assert not_folder.error.kind == "invalid_arguments"


@pytest.mark.slow
async def test_ten_thousand_files(harness, root: Path):
    for i in range(100):
        folder = root / f"pkg{i:03d}"
        folder.mkdir()
        for j in range(100):
            (folder / f"m{j:03d}.py").write_text(f"VALUE = {i * 100 + j}\n")
    listing = await harness.call("glob", {"pattern": "*.py"})
    assert listing.fields["match_count"] == 10_000
    assert listing.text.endswith(
        f"[... {10_000 - MAX_GLOB_RESULTS:,} more files; use a narrower pattern or path]"
    )
    found = await harness.call("grep", {"pattern": r"VALUE = 9999\b"})
    assert found.text == "pkg099/m099.py:1:VALUE = 9999"


def test_grep_agrees_with_raw_ripgrep(tree):
    raw = subprocess.run(
        [str(find_program("rg")), "--sort", "path", "-n", "--no-heading", "-S", "main", "src"],
        cwd=tree,
        capture_output=True,
        text=True,
    ).stdout
    assert raw.splitlines() == ["src/app.py:1:def main():", "src/util.py:2:MAIN = 'x'"]
