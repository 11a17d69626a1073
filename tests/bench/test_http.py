"""`bench http`'s server runs in a child process, and that process ends with the bench, also
when the bench fails (figures are not asserted: the machines are shared and noisy)."""

import os
from pathlib import Path

import httpx
import pytest

from opencomposer.bench.http import run_http_bench, serving

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def bench_servers() -> list[int]:
    """The pids of this process's children that run the bench server (read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):  # the process ended while we looked
            continue
        if ppid == os.getpid() and b"opencomposer.bench.http_server" in cmdline:
            found.append(int(stat.parent.name))
    return found


async def test_the_bench_reports_every_row_and_leaves_no_server():
    rows, info = await run_http_bench(concurrency=[1, 2], requests=4, turns=3, constrained_tokens=8)
    assert info == {"concurrency": [1, 2], "requests": 4, "turns": 3, "constrained_tokens": 8}
    assert [row.name for row in rows] == [
        *(
            f"chat completion, {c}: {figure}"
            for c in ("1 client", "2 clients")
            for figure in ("throughput", "p50 latency", "p99 latency")
        ),
        *(
            f"agent turn, {c}: first event {p}"
            for c in ("1 client", "2 clients")
            for p in ("p50", "p99")
        ),
        "constrained decoding, per token",
    ]
    constrained = rows[-1]
    assert constrained.baseline_label == "unconstrained"
    assert constrained.ratio is not None and constrained.ratio > 0
    assert bench_servers() == []


def test_the_server_is_a_child_process_that_ends_when_the_bench_is_interrupted(tmp_path: Path):
    with pytest.raises(KeyboardInterrupt), serving(tmp_path) as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert len(bench_servers()) == 1
        raise KeyboardInterrupt
    assert bench_servers() == []
