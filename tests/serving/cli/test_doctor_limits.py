"""`opencomposer doctor` reports the resource limits commands run under, next to the sandbox,
as this machine enforces them (compared with the same report made in this process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from opencomposer.agent.tools.sandbox import probe_bubblewrap
from opencomposer.agent.tools.terminal.limits import ResourceLimits
from opencomposer.config import SandboxSettings

CLI = str(Path(sys.executable).parent / "opencomposer")


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [
            CLI,
            "doctor",
            *args,
            "-c",
            "engine.backend=openai",
            "-c",
            "engine.base_url=http://127.0.0.1:9/v1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert "Traceback" not in proc.stderr
    return proc


def test_limits_follow_the_settings_and_this_machine():
    proc = doctor(
        "--json",
        "-c",
        "tools.sandbox.max_processes=64",
        "-c",
        "tools.sandbox.max_memory_bytes=268435456",
    )
    checks = json.loads(proc.stdout)["checks"]
    names = [check["name"] for check in checks]
    assert names[names.index("sandbox") + 1] == "limits"
    limits = ResourceLimits(
        SandboxSettings(max_processes=64, max_memory_bytes=256 * 1024**2),
        user_namespace=probe_bubblewrap()[0],
    )
    problems = limits.problems()
    assert checks[names.index("limits")] == {
        "name": "limits",
        "status": "warn" if problems else "ok",
        "detail": limits.summary(),
        "disables": "; ".join(problems) or None,
        "required": False,
    }
    assert "processes 64" in limits.summary() and "memory 256 MiB" in limits.summary()


def test_limits_in_the_table():
    out = doctor(COLUMNS="400").stdout
    line = next(line for line in out.splitlines() if line.startswith("limits"))
    assert "processes 1,024" in line and "file size 2 GiB" in line
