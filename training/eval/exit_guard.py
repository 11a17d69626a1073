"""The verifier's side of `sandbox_scripts/pytest_exit_guard.py`: the plugin mounted under a
name chosen for this verification, the pipe its records come back on, and what they say.

A pytest session that reported its start and never its end was ended from inside: by the code
under test (an `os._exit`, a kill of its own process), or by a crash. Either way its exit
status says nothing about the tests, so the verifier grades 0.
"""

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from opencomposer.agent.tools.sandbox import Mount

# The plugin, as a file (importing it here would import pytest into the bench's process).
_PLUGIN = Path(__file__).parent / "sandbox_scripts" / "pytest_exit_guard.py"
# Where the plugin finds its end of the pipe (the plugin names it too: it imports nothing of
# ours).
FD_VARIABLE = "VERIFIER_EXIT_GUARD_FD"

# Records kept at most (a record is ~60 bytes; the built-in mutation tasks run a few dozen
# sessions): what the code under test writes into the pipe cannot fill memory.
_MAX_RECORD_BYTES = 1024 * 1024
_PLUGIN_FOLDER = Path("/opencomposer-verifier")


@dataclass
class Sessions:
    """What the pytest sessions of one verification said."""

    plugin: str
    """The name the guard was loaded under."""

    started: dict[str, int] = field(default_factory=dict)
    """Nonce -> pid."""

    ended: set[str] = field(default_factory=set)

    def not_loaded(self, output: str) -> bool:
        """Whether a pytest could not import the guard: tests/test.sh replaced PYTHONPATH
        instead of adding to it. The agent cannot cause this (the name is chosen after it is
        gone), so it is the task's to fix; the verdict is 0 meanwhile, as pytest itself
        refused to run."""
        return f'Error importing plugin "{self.plugin}"' in output

    @property
    def unfinished(self) -> list[int]:
        """The pids of sessions that never said they ended."""
        return [pid for nonce, pid in self.started.items() if nonce not in self.ended]

    def read(self, records: bytes) -> None:
        """Lines the plugin wrote, and whatever else reached the pipe (ignored)."""
        for line in records.decode("ascii", errors="replace").splitlines():
            match line.split():
                case ["start", pid, nonce] if pid.isdigit():
                    self.started[nonce] = int(pid)
                case ["end", _, nonce, _] if nonce in self.started:
                    self.ended.add(nonce)


@dataclass(frozen=True)
class GuardedRun:
    """What a verifier script needs to run under the guard."""

    mount: Mount
    env: dict[str, str]
    pass_fds: list[int]
    sessions: Sessions


@contextlib.asynccontextmanager
async def exit_guard(task_env: Mapping[str, str]) -> AsyncIterator[GuardedRun]:
    """The guard for one script run: its plugin loaded into every pytest the script starts
    (`PYTEST_ADDOPTS`, added to the task's own), its records read while the script runs.
    `sessions` is complete once the block ends."""
    name = f"opencomposer_exit_guard_{secrets.token_hex(8)}"
    read_fd, write_fd = os.pipe()
    os.set_inheritable(write_fd, True)
    env = {
        "PYTEST_ADDOPTS": _joined(task_env.get("PYTEST_ADDOPTS"), f"-p {name}", " "),
        "PYTHONPATH": _joined(task_env.get("PYTHONPATH"), str(_PLUGIN_FOLDER), os.pathsep),
        FD_VARIABLE: str(write_fd),
    }
    plugin = Mount(_PLUGIN, _PLUGIN_FOLDER / f"{name}.py")
    sessions = Sessions(name)
    reader = asyncio.ensure_future(_drain(read_fd))
    try:
        yield GuardedRun(plugin, env, [write_fd], sessions)
    finally:
        os.close(write_fd)  # the script's copies are gone with its sandbox: the reader ends
        sessions.read(await reader)


async def _drain(fd: int) -> bytes:
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    kept = bytearray()
    try:
        while chunk := await reader.read(65536):
            kept += chunk[: max(0, _MAX_RECORD_BYTES - len(kept))]
    finally:
        transport.close()
    return bytes(kept)


def _joined(theirs: str | None, ours: str, separator: str) -> str:
    return f"{theirs}{separator}{ours}" if theirs else ours
