"""`opencomposer bench security` runs end to end: the limits in force, then every figure
beside its baseline (figures are not asserted: the machines are shared and noisy)."""

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from opencomposer.agent.tools.sandbox import probe_bubblewrap
from opencomposer.agent.tools.terminal.limits import ResourceLimits
from opencomposer.config import SandboxSettings

CLI = str(Path(sys.executable).parent / "opencomposer")


def test_bench_security_reports_the_limits_and_every_figure():
    proc = subprocess.run(
        [CLI, "bench", "security", "--runs", "3", "--json", "-c", "tools.sandbox.max_processes=64"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout[-3000:]
    report = json.loads(proc.stdout)
    limits = ResourceLimits(SandboxSettings(max_processes=64), user_namespace=probe_bubblewrap()[0])
    assert report["limits"] == [asdict(limit) for limit in limits.describe()]
    assert report["runs"] == 3
    rows = {row["name"]: row for row in report["rows"]}
    guards = [
        "sandbox start, host view",
        "sandbox start, system view",
        "view computed per command",
        "script start, isolated network",
        "grading one trial",
    ]
    assert list(rows) == [
        f"run_terminal `{c}`: {q}" for c in ("true", "echo") for q in ("p50", "p90")
    ] + ["fork bomb: killed after", *guards]
    for name, row in rows.items():
        if name.startswith("run_terminal") or name in guards:
            assert row["ours"] > 0 and row["baseline"] > 0 and row["ratio"] > 0
    bomb = rows["fork bomb: killed after"]
    if limits.cgroups.pids is not None:
        assert bomb["ours"] > 0 and bomb["note"].endswith("at 64 processes")
    else:
        assert bomb["ours"] is None and bomb["note"].startswith("not run")
