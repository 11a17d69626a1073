"""`opencomposer bench tools` runs end to end and reports every figure beside its baseline
(figures are not asserted: the machines are shared and noisy)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).parent / "opencomposer")


@pytest.mark.slow
def test_bench_tools_on_a_small_tree(tmp_path: Path):
    tree = tmp_path / "tree"
    for i in range(30):
        package = tree / f"pkg{i % 3}"
        package.mkdir(parents=True, exist_ok=True)
        (package / f"mod{i}.py").write_text(
            f"import os\n\nclass Thing{i}Error(Exception):\n    pass\n\n\n"
            f"def handler_{i}(self, value):\n    return os.path.join(value, '{i}')\n"
        )
    proc = subprocess.run(
        [
            CLI,
            "bench",
            "tools",
            "--tree",
            str(tree),
            "--repeat",
            "1",
            "--semantic-files",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["files"], report["lines"]) == (30, 240)
    names = [row["name"] for row in report["rows"]]
    assert names == [
        "grep: common word",
        "grep: regex",
        "grep: literal",
        "grep: absent",
        "symbol index: full build",
        "symbol index: update after one edit",
        "semantic index: build",
        "semantic search: query",
    ]
    for row in report["rows"]:
        assert row["ours"] > 0
    # The benchmark edits a scratch copy, never the tree it was given.
    assert sorted(p.name for p in tree.rglob("*.py"))[:2] == ["mod0.py", "mod1.py"]
    assert (tree / "pkg0/mod0.py").read_text().count("def ") == 1


def test_bench_agent_reports_every_figure():
    proc = subprocess.run(
        [
            CLI,
            "bench",
            "agent",
            "--steps",
            "5",
            "--calls",
            "5",
            "--items",
            "200",
            "--thread-items",
            "50",
            "--rollouts",
            "4",
            "--repeat",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["steps"], report["calls"], report["items"]) == (5, 5, 200)
    names = [row["name"] for row in report["rows"]]
    assert names == [
        "model step: whole turn",
        "model step: runtime alone",
        "tool call: through the runtime",
        "trace store: append",
        "trace store: size / 1,000 items",
        "prompt rebuild: 50 items",
        "model step at 100 items",
        "model step at 1,000 items",
        "trace store: a turn / 1,000 items",
        "rollouts: 4 threads at once",
    ]
    assert report["rollouts"] == 4
    # "runtime alone" and "tool call" are differences of two timings: on a busy machine
    # noise can make them negative, so only the direct measurements must be positive.
    differences = {"model step: runtime alone", "tool call: through the runtime"}
    for row in report["rows"]:
        assert all(math.isfinite(row[key]) for key in ("ours", "baseline", "ratio"))
        if row["name"] not in differences:
            assert row["ours"] > 0 and row["baseline"] > 0 and row["ratio"] > 0


def test_bench_http_reports_every_figure():
    proc = subprocess.run(
        [
            CLI,
            "bench",
            "http",
            "--concurrency",
            "1",
            "--concurrency",
            "3",
            "--requests",
            "6",
            "--turns",
            "4",
            "--no-readme-turn",  # a minute of the real model: tests/bench/test_readme_turn.py
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["concurrency"], report["requests"], report["turns"]) == ([1, 3], 6, 4)
    names = [row["name"] for row in report["rows"]]
    assert names == [
        *(
            f"chat completion, {c}: {figure}"
            for c in ("1 client", "3 clients")
            for figure in ("throughput", "p50 latency", "p99 latency")
        ),
        *(
            f"agent turn, {c}: first event {p}"
            for c in ("1 client", "3 clients")
            for p in ("p50", "p99")
        ),
        "constrained decoding, per token",
    ]
    for row in report["rows"]:
        assert row["ours"] > 0 and row["baseline"] > 0 and row["ratio"] > 0


def test_bench_lsp_reports_every_figure():
    proc = subprocess.run(
        [CLI, "bench", "lsp", "--completions", "4", "--turns", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["completions"], report["turns"]) == (4, 3)
    assert [row["name"] for row in report["rows"]] == [
        f"{what}: {p}"
        for what in (
            "inline completion, request to response",
            "event delivery, request to first event",
        )
        for p in ("p50", "p99")
    ]
    for row in report["rows"]:
        assert row["ours"] > 0 and row["baseline"] > 0
