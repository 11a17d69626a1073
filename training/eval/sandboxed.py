"""One script of a task (setup.sh, solve.sh, test.sh) run in a bubblewrap sandbox of its own,
to the end or to its time limit, with every process it started gone when this returns.

The bench needs bubblewrap: without a mount namespace the tests could not be kept from the
agent, nor shown to the verifier at /tests with the reward folder at /logs/verifier as Harbor
shows them. The sandbox is the tool harness's in its `system` view: an allow-list of the host
(the installed system, the toolchains, Python), never the host's root with holes, so no task
folder, checkout or git object of the host is there to read; the task's own folders are bound
on top. A task allowed the network gets an isolated one (the internet, not this machine's
loopback services, a Ray cluster's control ports among them).
"""

import asyncio
import os
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.tools.sandbox import (
    BubblewrapSandbox,
    Mount,
    default_masked_paths,
    kill_group,
    probe_bubblewrap,
)
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.config import SandboxSettings
from opencomposer.paths import find_program
from opencomposer.training.errors import TrainingError

OUTPUT_CAP = 8 * 1024 * 1024
"""Bytes of a script's output kept (its head); a runaway test cannot fill the disk."""


class SandboxUnavailable(TrainingError):
    """Bubblewrap cannot start a sandbox here, so tasks cannot be run honestly."""


@dataclass(frozen=True)
class ScriptRun:
    exit_code: int | None
    """None when the script was stopped at its time limit."""

    output: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None


def require_bubblewrap() -> Path:
    bwrap = find_program("bwrap")
    works, detail = probe_bubblewrap(bwrap)
    if not works or bwrap is None:
        raise SandboxUnavailable(
            f"the bench runs every task in bubblewrap, which cannot start here ({detail}); "
            "install bubblewrap (apt-get install bubblewrap) on a machine that allows user "
            "namespaces"
        )
    return bwrap


async def run_script(
    command: str,
    *,
    workspace: Path,
    mounts: Sequence[Mount],
    data_dir: Path,
    hidden: Sequence[Path],
    timeout: float,
    env: Mapping[str, str] | None = None,
    network: bool = False,
    memory_mb: int | None = None,
    pass_fds: Sequence[int] = (),
) -> ScriptRun:
    """`command` run by bash in `workspace` (also at every mount's target), stdout and stderr
    merged in order. `data_dir` (opencomposer's) and `hidden` are masked. `pass_fds` stay
    open in the script (a pipe the verifier reads)."""
    settings = SandboxSettings(
        max_memory_bytes=memory_mb * 1024 * 1024 if memory_mb else None,
        max_lifetime=timeout,
        view="system",
        network="isolated",
    )
    sandbox = BubblewrapSandbox(
        workspace,
        require_bubblewrap(),
        default_masked_paths(Path.home(), data_dir, hidden),
        settings,
        quarantine=data_dir / "quarantine",
        mounts=mounts,
    )
    base, _ = scrub_environment(os.environ)
    # The Python running the bench first (its venv has pytest): what a task's Dockerfile
    # installs for Harbor, this machine has there.
    base["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), base.get("PATH", "")])
    # The image has pytest alone; this venv's other pytest plugins would load into every test
    # run (a second of start-up each, and their warnings in the logs graders read).
    base["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    limits = sandbox.limits.open()
    loop = asyncio.get_running_loop()
    started = loop.time()
    capture = _Capture()
    try:
        process = await sandbox.spawn(
            f"exec 2>&1; {command}",
            cwd=workspace,
            env={**base, **(env or {})},
            network=network,
            stdin=False,
            limits=limits,
            pass_fds=pass_fds,
        )
        try:
            await asyncio.wait_for(capture.read(process), timeout)
            exit_code: int | None = await process.wait()
        except TimeoutError:
            exit_code = None
        finally:
            kill_group(process)
            await process.wait()
    finally:
        await limits.release()
    text = capture.text()
    if exit_code is None:
        text += f"\n[stopped after {timeout:g} s]"
    return ScriptRun(exit_code, text, loop.time() - started)


class _Capture:
    """What the script printed so far (its stderr joins its stdout; then bubblewrap's own
    stderr), the head kept up to the cap; read whole or after a timeout cut it short."""

    def __init__(self) -> None:
        self.output = bytearray()
        self.errors = bytearray()

    async def read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None and process.stderr is not None
        await asyncio.gather(
            self._drain(process.stdout, self.output), self._drain(process.stderr, self.errors)
        )
        await process.wait()

    @staticmethod
    async def _drain(stream: asyncio.StreamReader, into: bytearray) -> None:
        while chunk := await stream.read(65536):
            into += chunk[: max(0, OUTPUT_CAP - len(into))]

    def text(self) -> str:
        return bytes(self.output + self.errors).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class StartCost:
    """Median seconds to start a sandbox and run `true` in it."""

    bare: float
    """`bwrap --ro-bind / / true`: bubblewrap's own floor."""

    task: float
    """A task script's sandbox: masks, mounts, limits, the process group supervised."""


async def start_cost(data_dir: Path, scratch: Path, samples: int = 9) -> StartCost:
    """What every setup, oracle and verifier run pays before the script starts, beside the
    least a bubblewrap sandbox costs; `scratch` is an empty folder to serve as the workspace."""
    bwrap = require_bubblewrap()
    bare, task = [], []
    for _ in range(samples):
        loop = asyncio.get_running_loop()
        started = loop.time()
        process = await asyncio.create_subprocess_exec(
            str(bwrap), "--ro-bind", "/", "/", "true", stdin=asyncio.subprocess.DEVNULL
        )
        await process.wait()
        bare.append(loop.time() - started)
        run = await run_script(
            "true",
            workspace=scratch,
            mounts=[Mount(scratch, Path("/app"), writable=True)],
            data_dir=data_dir,
            hidden=[],
            timeout=60,
        )
        task.append(run.seconds)
    return StartCost(statistics.median(bare), statistics.median(task))
