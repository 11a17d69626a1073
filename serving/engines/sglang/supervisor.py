"""Supervision of one SGLang server process: start it, wait until it serves, forward its output
to our log, and stop it.

The server forks scheduler and detokenizer processes that hold the GPUs, so it runs in its
own process group and is stopped as a group (SIGTERM, then SIGKILL after a grace period) on
`stop`, on garbage collection and at interpreter exit: no orphan keeps the GPUs.
"""

import asyncio
import logging
import os
import shlex
import signal
import socket
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

import httpx

from opencomposer.serving.engines.errors import EngineTimeout, EngineUnavailable
from opencomposer.serving.engines.sglang.flags import (
    SGLANG_SERVER,
    SGLangLaunch,
    SGLangLaunchError,
    build_command,
    read_model_config,
)

log = logging.getLogger(__name__)
server_log = logging.getLogger(f"{__package__}.server")
"""Where the server's own output goes, line by line."""

_TAIL_LINES = 40
_POLL_INTERVAL = 0.25


class SGLangServer:
    """A launched server, ready to serve at `url` once `start` returns. It is stopped as a
    group by `stop`, or by a finalizer when it is dropped without one."""

    def __init__(self, proc: asyncio.subprocess.Process, url: str, grace: float) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.url = url
        """The server's root, e.g. `http://127.0.0.1:30000`."""
        self._grace = grace
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._logs = asyncio.create_task(_forward_logs(proc.stdout, self._tail))
        """Reads the output pipe; it ends once every process that inherited the pipe is gone."""
        self._finalizer = weakref.finalize(self, _terminate_group, proc.pid, grace)

    @classmethod
    async def start(
        cls, launch: SGLangLaunch, prefix: Sequence[str] = SGLANG_SERVER
    ) -> "SGLangServer":
        """Launch the server and wait until /health and /v1/models answer. A server that
        exits or is not ready in `startup_timeout` is stopped, and the error carries the tail
        of its output."""
        if launch.port == 0:
            launch = replace(launch, port=_free_port(launch.host))
        command = build_command(launch, read_model_config(launch.model_path), prefix=prefix)
        log.info("launching SGLang: %s", shlex.join(command))
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as a whole
                limit=2**20,
            )
        except OSError as exc:
            raise EngineUnavailable(f"cannot start {command[0]}: {exc}") from None
        server = cls(proc, f"http://{_url_host(launch.host)}:{launch.port}", launch.stop_grace)
        try:
            ready = await _wait_ready(proc, server.url, launch.startup_timeout)
        except BaseException:
            await server.stop()
            raise
        if not ready:
            code = proc.returncode
            await server.stop()  # also drains the output, so the tail has its last words
            tail = "\n".join(server._tail) or "(no output)"
            if code is not None:
                raise EngineUnavailable(
                    f"the SGLang server exited with code {code} while starting; its last "
                    f"output:\n{tail}"
                )
            raise EngineTimeout(
                f"the SGLang server was not ready after {launch.startup_timeout:g}s (raise "
                f"startup_timeout for large checkpoints); its last output:\n{tail}"
            )
        log.info("SGLang server ready at %s (pid %d)", server.url, proc.pid)
        return server

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    async def stop(self) -> None:
        """SIGTERM the group and give it the grace period to be gone (the leader exited and the
        output pipe closed, so its children are gone too), then SIGKILL whatever is left."""
        _signal_group(self.proc.pid, signal.SIGTERM)
        if not await self._gone(self._grace):
            log.warning(
                "the SGLang server was still running %gs after SIGTERM; killing it", self._grace
            )
        _signal_group(self.proc.pid, signal.SIGKILL)
        await self._gone(5.0)
        self._finalizer.detach()
        self._logs.cancel()  # in case a process outside the group still holds the pipe

    async def _gone(self, timeout: float) -> bool:
        # Polled: what `Process.wait()` waits for differs between Python versions.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.proc.returncode is None or not self._logs.done():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True


async def _wait_ready(proc: asyncio.subprocess.Process, root: str, timeout: float) -> bool:
    """Poll until /health and /v1/models answer 200: True, or False once the process exits
    or the time is up. /health alone can pass before the model is registered."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as http:
        while proc.returncode is None and loop.time() < deadline:
            if await _answers(http, f"{root}/health") and await _answers(http, f"{root}/v1/models"):
                return True
            await asyncio.sleep(_POLL_INTERVAL)
    return False


async def _answers(http: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await http.get(url)).status_code == 200
    except httpx.HTTPError:
        return False


async def _forward_logs(stream: asyncio.StreamReader, tail: deque[str]) -> None:
    """Copy the server's output to our logger, keeping the last lines for error messages.
    A module function, not a method, so the running task does not keep the server alive (its
    finalizer stops a server that is dropped)."""
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # a line over the limit; the reader has dropped it
            server_log.warning("(an over-long line of server output was dropped)")
            continue
        if not line:
            return
        text = line.decode(errors="replace").rstrip()
        tail.append(text)
        server_log.info(text)


def _terminate_group(pid: int, grace: float) -> None:
    """`SGLangServer.stop` without an event loop, for the finalizer (garbage collection, exit); it
    can only watch the leader."""
    if not _signal_group(pid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not _exited(pid):
        time.sleep(0.05)
    _signal_group(pid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # already reaped, by asyncio's child watcher
        return True
    return reaped != 0


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:
            raise SGLangLaunchError(f"cannot listen on host {host!r}: {exc}") from None
        return sock.getsockname()[1]


def _url_host(host: str) -> str:
    """Where to reach a server bound to `host` (a wildcard bind is reached on loopback)."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{host}]" if ":" in host else host
