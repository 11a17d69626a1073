"""`opencomposer bench security`: the resource limits commands run under here, and what they
cost per `run_terminal` call.

Each call pays for its limits: a cgroup made, written and removed, the child joining it and
lowering its rlimits between fork and exec (which also costs subprocess its vfork fast path),
and the job supervisor reading the cgroup's counters while it waits for the exit. Measured
through the tool harness: `true` and a short `echo`, N calls each, p50 and p90, in the
sandbox this machine uses, beside the same sandbox with no limits at all; the two alternate
call by call, so drift on a shared machine falls on both alike. Where the process limit is a
cgroup's, also how long a fork bomb lives at the configured limit before it is killed (no
baseline: without a limit it runs until the machine gives out, so it is not run then).
"""

import copy
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.sandbox import Sandbox
from opencomposer.agent.tools.terminal.limits import CommandLimits, ResourceLimits
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.bench.rows import Row, percentile
from opencomposer.config import SandboxSettings, ToolSettings

COMMANDS = {"true": "true", "echo": "echo opencomposer bench security"}
BOMB = "b(){ b|b & }; b; sleep 60"


class _NoLimits(ResourceLimits):
    """The baseline: every command started with no cgroup and no rlimit."""

    def __init__(self, settings: SandboxSettings) -> None:
        super().__init__(settings, user_namespace=False)
        self.wrapper = []

    def open(self) -> CommandLimits:
        return CommandLimits()


def without_limits(sandbox: Sandbox) -> Sandbox:
    bare = copy.copy(sandbox)
    bare.limits = _NoLimits(sandbox.limits.settings)
    return bare


async def _seconds(harness: ToolHarness, command: str) -> float:
    started = time.perf_counter()
    outcome = await harness.call("run_terminal", {"command": command})
    elapsed = time.perf_counter() - started
    if not outcome.ok or "[exit code 0]" not in outcome.text:
        raise RuntimeError(f"`{command}` failed in the benchmark: {outcome.text}")
    return elapsed


async def bench_calls(limited: ToolHarness, bare: ToolHarness, runs: int) -> list[Row]:
    rows = []
    for label, command in COMMANDS.items():
        await _seconds(limited, command)  # warm: the sandbox probe, the first cgroup
        await _seconds(bare, command)
        ours, baseline = [], []
        for _ in range(runs):
            ours.append(await _seconds(limited, command))
            baseline.append(await _seconds(bare, command))
        for name, q in (("p50", 0.5), ("p90", 0.9)):
            rows.append(
                Row(
                    f"run_terminal `{label}`: {name}",
                    "no limits",
                    percentile(baseline, q),
                    percentile(ours, q),
                    "s",
                    f"{runs} calls each",
                )
            )
    return rows


async def bench_bomb(limited: ToolHarness, processes_by_cgroup: bool, limit: int) -> Row:
    name = "fork bomb: killed after"
    if not processes_by_cgroup:
        return Row(name, "", None, None, "s", "not run: no cgroup enforces the process limit here")
    started = time.perf_counter()
    outcome = await limited.call("run_terminal", {"command": BOMB, "timeout": 60})
    elapsed = time.perf_counter() - started
    stopped = outcome.data.get("limit") == "tools.sandbox.max_processes"
    return Row(
        name,
        "",
        None,
        elapsed if stopped else None,
        "s",
        f"`{BOMB}` at {limit:,} processes"
        if stopped
        else f"NOT stopped by the process limit: {outcome.text[-200:]}",
    )


async def run_security_bench(
    settings: SandboxSettings, *, runs: int = 50, bomb: bool = True
) -> tuple[list[Row], dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="opencomposer-bench-") as scratch:
        root = Path(scratch)
        (root / "workspace").mkdir()
        tool_settings = ToolSettings(sandbox=settings)
        limited = ToolHarness(Workspace(root / "workspace"), tool_settings, root / "data")
        bare = ToolHarness(Workspace(root / "workspace"), tool_settings, root / "bare")
        bare.sandbox = without_limits(limited.sandbox)
        limits = limited.sandbox.limits
        try:
            rows = await bench_calls(limited, bare, runs)
            if bomb:
                by_cgroup = limits.cgroups.pids is not None
                rows.append(await bench_bomb(limited, by_cgroup, settings.max_processes))
        finally:
            await limited.close()
            await bare.close()
        info = {
            "sandbox": limited.sandbox.name,
            "runs": runs,
            "limits": [asdict(limit) for limit in limits.describe()],
        }
    return rows, info
