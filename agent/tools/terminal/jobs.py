"""Commands as jobs: every command is a process we own, read and can kill, whether the call
waits for it or not.

A foreground command is awaited up to a soft timeout; one still running then is not killed
but returned as a job with its output so far, to be read, fed input or killed later. Each
read returns what arrived since the last one.

Output is redacted once, as one stream: stdout and stderr in arrival order go through one
`SourcedStreamRedactor` for the job's whole life, which holds back only what may still become
a secret (a private key printed a line a minute, a token split between stdout and stderr or
between the foreground call and a later read). What it releases feeds every sink: the window
the model reads and the live stream of the call that started the command (its item's deltas:
what clients see and the trace store keeps). Both keep only a head and a tail of output_cap
characters, the live one streaming its head and sending the tail after a marker when the call
ends, so a command printing gigabytes costs the server two windows and what the redaction
holds (at most a private key's PEM_SPAN) in memory, and one window in the trace.

When a command's main process exits, whatever it left running in the background is killed
(it would hold the output pipes open, and nobody could reach it): a server must be started
with `background=True`. Killing takes the whole tree: one process group in the fallback, the
pid namespace under bubblewrap, and every process in the command's cgroup where it has one.

Each command runs under its sandbox's resource limits. The supervisor that waits for its exit
also reads its cgroup's counters, and kills the command once it hits the process or memory
limit: a fork bomb kept at the limit would otherwise hold the CPU until the lifetime limit.
"""

import asyncio
import codecs
import contextlib
import itertools
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from opencomposer.agent.tools.errors import (
    Denied,
    InvalidArguments,
    NotFound,
    UnexpectedEnvironment,
)
from opencomposer.agent.tools.sandbox import Sandbox
from opencomposer.agent.tools.terminal.limits import Breach, CommandLimits
from opencomposer.redact import Redactor, SourcedStreamRedactor

log = logging.getLogger(__name__)

NO_OUTPUT = "(no output)"
"""The whole `output` of a read in which the command printed nothing visible."""

# Seconds a background start waits before returning, so a command that fails at once (a typo,
# a port in use) reports its error and exit code in the same call.
BACKGROUND_SETTLE = 0.5
# Seconds write_input waits for the program's reaction to its input.
INPUT_SETTLE = 0.5
# Seconds between SIGTERM and SIGKILL.
KILL_GRACE = 1.0
# Seconds to finish reading after the process tree is gone; only a process that left the
# group (setsid, daemon) can keep a pipe open longer.
DRAIN_TIMEOUT = 1.0
# Longest wait between two looks at whether a command has exited.
EXIT_POLL = 0.05
# Seconds a partial line waits before it is streamed anyway (a prompt without a newline): the
# live stream is sent in whole lines, so that output in tiny writes is not an event per write.
STREAM_FLUSH = 0.1
# Longest partial line held back from live streaming.
MAX_PENDING = 4096
_CHUNK = 64 * 1024

OnOutput = Callable[[str, str], None]
"""on_output(stream, text): `stream` is "stdout" or "stderr"; text is redacted (text held back
as a possible secret goes out with the stream whose output released it)."""


@dataclass
class CommandResult:
    job_id: str | None
    """The job to read, feed or kill later; None when the command finished within the call."""

    exit_code: int | None
    """None while running. A negative number -N means the process we started was killed by
    signal N (by kill(), the lifetime limit, or anything else). Under bubblewrap a command
    killed by a signal inside the sandbox shows as 128+N, as a shell reports it."""

    output: str
    """stdout and stderr interleaved in arrival order since the last read, secrets masked,
    head and tail kept around a "[... N bytes omitted ...]" line; NO_OUTPUT when empty."""

    output_bytes: int
    """Bytes the command printed in this read window."""

    truncated: bool
    """Part of this window's output was left out of `output`."""

    timed_out: bool
    """The soft timeout passed: the command keeps running as `job_id`."""

    running: bool
    """Still running (or its last output not yet read): come back with `job_id`."""

    duration_ms: int
    """Time since the command started, up to now or to its exit."""

    limit: str | None = None
    """The setting whose limit killed the command (`tools.sandbox.max_processes`,
    `tools.sandbox.max_memory_bytes`, `tools.sandbox.max_lifetime`); the output ends with a
    note saying so."""


@dataclass
class _Taken:
    """A window's content, as it is handed out."""

    head: list[tuple[str, str]]
    """(stream, text) pieces, in order."""

    marker: str
    """"[... N bytes omitted ...]" between head and tail, or empty."""

    tail: list[tuple[str, str]]
    bytes: int
    truncated: bool

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.head) + self.marker + self.tail_text

    @property
    def tail_text(self) -> str:
        return "".join(text for _, text in self.tail)


class _Window:
    """Output since the last take: the first third and the last two thirds of `cap`
    characters (the end — test summaries, the last error — matters most), each piece with
    the stream it came from, and a count of what fell between."""

    def __init__(self, cap: int) -> None:
        self._head_cap = cap // 3
        self._tail_cap = cap - self._head_cap
        self._clear()

    def _clear(self) -> None:
        self._head: list[tuple[str, str]] = []
        self._head_len = 0
        self._tail: deque[tuple[str, str]] = deque()
        self._tail_len = 0
        self._chars = 0
        self.bytes = 0
        """Bytes the command printed in this window (counted by the reader)."""

    def add(self, stream: str, text: str) -> str:
        """Keep `text`; the part of it that went to the head is returned."""
        self._chars += len(text)
        kept = text[: max(0, self._head_cap - self._head_len)]
        if kept:
            self._head.append((stream, kept))
            self._head_len += len(kept)
            text = text[len(kept) :]
        if text:
            self._tail.append((stream, text))
            self._tail_len += len(text)
            while self._tail_len - len(self._tail[0][1]) >= self._tail_cap:
                self._tail_len -= len(self._tail.popleft()[1])
        return kept

    def take(self) -> _Taken:
        """The window, which starts empty again."""
        tail = list(self._tail)
        excess = self._tail_len - self._tail_cap
        if excess > 0:
            tail[0] = (tail[0][0], tail[0][1][excess:])
        taken = _Taken(self._head, "", tail, self.bytes, False)
        shown = self._head_len + min(self._tail_len, self._tail_cap)
        if self._chars > shown:
            head = "".join(text for _, text in taken.head)
            omitted = max(0, self.bytes - len(head.encode()) - len(taken.tail_text.encode()))
            newline = "" if head.endswith("\n") else "\n"
            taken.marker = f"{newline}[... {omitted:,} bytes omitted ...]\n"
            taken.truncated = True
        self._clear()
        return taken


class _Live:
    """The live stream of the call that started a command: the head of a window sent as it
    arrives, in whole lines, and at the end of the call the marker and the tail. What the
    item's deltas hold, and so the trace store, is capped as the model's output is."""

    def __init__(self, cap: int, send: OnOutput) -> None:
        self._window = _Window(cap)
        self._send = send
        self._partial = {"stdout": "", "stderr": ""}

    def count(self, nbytes: int) -> None:
        self._window.bytes += nbytes

    def add(self, stream: str, text: str) -> None:
        text = self._partial[stream] + self._window.add(stream, text)
        cut = len(text) if len(text) > MAX_PENDING else text.rfind("\n") + 1
        self._partial[stream] = text[cut:]
        self._emit(stream, text[:cut])

    def waiting(self, stream: str) -> bool:
        """Whether a partial line of `stream` waits to be sent."""
        return bool(self._partial[stream])

    def send_partial(self, stream: str) -> None:
        text, self._partial[stream] = self._partial[stream], ""
        self._emit(stream, text)

    def close(self) -> None:
        """Send what waits, then the marker and the tail, if output was left out."""
        for stream in self._partial:
            self.send_partial(stream)
        taken = self._window.take()
        if taken.marker:
            self._emit("stdout", taken.marker)
            for stream, text in taken.tail:
                self._emit(stream, text)

    def _emit(self, stream: str, text: str) -> None:
        if text:
            try:
                self._send(stream, text)
            except Exception:  # a broken listener must not stop the pipe from draining
                log.exception("on_output failed")


class _Output:
    """A command's output on its way out: both streams, in arrival order, through one stream
    redaction (a secret split between them is one secret), then into the model's window and,
    while it is attached, the live stream."""

    def __init__(self, redactor: Redactor, cap: int, on_output: OnOutput | None) -> None:
        self._redaction = SourcedStreamRedactor(redactor)
        self.window = _Window(cap)
        self.live = _Live(cap, on_output) if on_output is not None else None

    def add(self, stream: str, text: str, nbytes: int) -> None:
        self.window.bytes += nbytes
        if self.live is not None:
            self.live.count(nbytes)
        self._deliver(self._redaction.push(stream, text))

    def end(self) -> None:
        """The command's output has ended: what the redaction still holds goes out."""
        self._deliver(self._redaction.flush())

    def detach(self) -> None:
        """The call that started the command has ended: its live stream ends with it."""
        if self.live is not None:
            self.live.close()
            self.live = None

    def _deliver(self, parts: list[tuple[str, str]]) -> None:
        for stream, text in parts:
            self.window.add(stream, text)
            if self.live is not None:
                self.live.add(stream, text)


@dataclass(eq=False)
class _Job:
    id: str
    process: asyncio.subprocess.Process
    limits: CommandLimits
    output: _Output
    has_stdin: bool
    started: float

    supervisor: "asyncio.Task[None]" = field(init=False)
    ended: float | None = None
    stopped_by: Breach | None = None
    """The limit we killed it for; its note ends the final output."""

    @property
    def finished(self) -> bool:
        """Exited and fully read."""
        return self.supervisor.done()


async def _exited(
    process: asyncio.subprocess.Process, limits: CommandLimits | None = None
) -> Breach | None:
    """Wait for the process itself to exit, or for `limits` to be breached (returned).
    Process.wait() also waits for its pipes to close, which a child left in the background
    holds open indefinitely. The exit is seen through a pidfd, which becomes readable the
    moment the process ends; the limits' counters, and the exit status where there is no
    pidfd, are looked at every millisecond at first, backing off to EXIT_POLL. (Polling
    alone rounded each exit up to the next step of the backoff: a command that took 33 ms was
    seen at 63.)"""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def on_exit() -> None:  # the pidfd stays readable: the reader may fire again before removal
        if not ended.done():
            ended.set_result(None)

    pidfd = _pidfd(process)
    if pidfd is not None:
        loop.add_reader(pidfd, on_exit)
    try:
        delay = 0.001
        while process.returncode is None:
            breach = limits.breach() if limits is not None else None
            if breach is not None:
                return breach
            if ended.done():  # it has exited: the child watcher reaps it in a moment
                await asyncio.sleep(0.001)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(ended), delay)
            delay = min(delay * 2, EXIT_POLL)
    finally:
        if pidfd is not None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
    return None


def _pidfd(process: asyncio.subprocess.Process) -> int | None:
    """A pidfd of the process (Linux 5.3+), or None where there is none or it has gone."""
    if process.returncode is not None or not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(process.pid)
    except OSError:
        return None


def _signal(process: asyncio.subprocess.Process, sig: int) -> None:
    """Signal the process group the command leads (its pgid is its pid: own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


class JobManager:
    """Runs commands in a sandbox and keeps the ones still running as jobs with ids."""

    def __init__(
        self,
        sandbox: Sandbox,
        workspace_root: Path,
        env: Mapping[str, str],
        redactor: Redactor,
        *,
        output_cap: int = 30_000,
        max_lifetime: float = 3600,
        on_exit: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`on_exit` is awaited once each job's processes are gone and its output drained,
        before the job counts as finished (the git guard reviews the workspace there)."""
        self._sandbox = sandbox
        self._on_exit = on_exit
        self._root = workspace_root.resolve()
        self._env = dict(env)
        self._redactor = redactor
        self._output_cap = output_cap
        self._max_lifetime = max_lifetime
        self._jobs: dict[str, _Job] = {}
        self._collected: set[str] = set()
        self._ids = itertools.count(1)
        self._closed = False

    # ------------------------------------------------------------------ calls

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float = 30.0,
        background: bool = False,
        network: bool = False,
        on_output: OnOutput | None = None,
    ) -> CommandResult:
        """Run `command`. In the foreground, wait up to `timeout` seconds; in the background
        (stdin open for write_input), up to BACKGROUND_SETTLE. Either way a command that has
        not finished keeps running and comes back with its job id. If the caller is
        cancelled, the command's process tree is killed before the cancellation goes on.
        `on_output` receives the output live, in whole lines."""
        if timeout <= 0:
            raise InvalidArguments(f"timeout must be positive, got {timeout}")
        if self._closed:
            raise UnexpectedEnvironment("the terminal has been closed")
        job = await self._start(
            command, self._check_cwd(cwd), stdin=background, network=network, on_output=on_output
        )
        wait = min(timeout, BACKGROUND_SETTLE) if background else timeout
        try:
            await asyncio.wait([job.supervisor], timeout=wait)
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(job))
            self._jobs.pop(job.id, None)
            job.output.detach()
            raise
        result = self._collect(
            job, timed_out=not background and not job.finished, show_id=not job.finished
        )
        job.output.detach()
        return result

    async def capture(self, command: str, *, cwd: Path, timeout: float) -> tuple[int, str] | None:
        """Run a short command for the runtime itself (e.g. `git status` for the prompt), in
        the same sandbox but not as a job the model sees: (exit code, stdout), or None when
        it did not finish within `timeout` (it is killed)."""
        process, limits = await self._spawn(
            command, self._check_cwd(cwd), stdin=False, network=False
        )
        try:
            stdout, _ = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            _signal(process, signal.SIGKILL)
            await process.wait()
            return None
        except asyncio.CancelledError:
            _signal(process, signal.SIGKILL)
            raise
        finally:
            await asyncio.shield(limits.release())
        text = stdout.decode("utf-8", errors="replace")
        return process.returncode or 0, self._redactor.redact(text)

    async def output(self, job_id: str, wait: float = 0.0) -> CommandResult:
        """Output since the last read; waits up to `wait` seconds for the job to finish."""
        if wait < 0:
            raise InvalidArguments(f"wait must not be negative, got {wait}")
        job = self._get(job_id)
        if wait > 0:
            await asyncio.wait([job.supervisor], timeout=wait)
        return self._collect(job)

    async def write_input(self, job_id: str, text: str) -> CommandResult:
        """Send `text` (exactly; include the newline) to the job's stdin and return its
        reaction: output within INPUT_SETTLE seconds."""
        job = self._get(job_id)
        stdin = job.process.stdin
        if not job.has_stdin or stdin is None:
            raise InvalidArguments(
                f"{job_id} was not started with background=true, so it has no input",
                hint="Start the command with background=true to send it input.",
            )
        if job.process.returncode is not None:
            raise InvalidArguments(
                f"{job_id} has exited and reads no more input",
                hint="Read its final output instead.",
            )
        stdin.write(text.encode())
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, TimeoutError):
            await asyncio.wait_for(stdin.drain(), INPUT_SETTLE)
        await asyncio.wait([job.supervisor], timeout=INPUT_SETTLE)
        return self._collect(job)

    async def kill(self, job_id: str) -> CommandResult:
        """SIGTERM to the job's process tree, SIGKILL after KILL_GRACE; its final output."""
        job = self._get(job_id)
        await self._stop(job)
        return self._collect(job)

    async def close(self) -> None:
        """Kill every job. Safe to call twice; later runs are refused."""
        self._closed = True
        await asyncio.gather(*(self._stop(job) for job in list(self._jobs.values())))
        self._jobs.clear()

    # ------------------------------------------------------------------ jobs

    def _check_cwd(self, cwd: Path) -> Path:
        resolved = (self._root / cwd).resolve()
        if not resolved.is_relative_to(self._root):
            raise Denied(
                f"{cwd} is outside the workspace {self._root}",
                hint="Run commands from the workspace or a folder inside it.",
            )
        if not resolved.is_dir():
            raise NotFound(f"{cwd} is not a folder in the workspace")
        return resolved

    def _get(self, job_id: str) -> _Job:
        if job_id in self._jobs:
            return self._jobs[job_id]
        if job_id in self._collected:
            raise NotFound(f"{job_id} has finished and its final output was already returned")
        running = ", ".join(self._jobs) or "none"
        raise NotFound(f"no job {job_id!r}", hint=f"Jobs still running: {running}.")

    async def _spawn(
        self, command: str, cwd: Path, *, stdin: bool, network: bool
    ) -> tuple[asyncio.subprocess.Process, CommandLimits]:
        try:
            limits = self._sandbox.limits.open()
        except OSError as exc:
            raise UnexpectedEnvironment(
                f"could not put the command under its resource limits: {exc}"
            ) from exc
        try:
            process = await self._sandbox.spawn(
                command, cwd=cwd, env=self._env, network=network, stdin=stdin, limits=limits
            )
        except (OSError, subprocess.SubprocessError) as exc:
            await limits.release()
            raise UnexpectedEnvironment(
                f"could not start the command in the {self._sandbox.name} sandbox: {exc}"
            ) from exc
        return process, limits

    async def _start(
        self, command: str, cwd: Path, *, stdin: bool, network: bool, on_output: OnOutput | None
    ) -> _Job:
        process, limits = await self._spawn(command, cwd, stdin=stdin, network=network)
        loop = asyncio.get_running_loop()
        job = _Job(
            f"job-{next(self._ids)}",
            process,
            limits,
            _Output(self._redactor, self._output_cap, on_output),
            stdin,
            loop.time(),
        )
        self._jobs[job.id] = job
        job.supervisor = asyncio.create_task(self._supervise(job), name=f"terminal {job.id}")
        return job

    async def _supervise(self, job: _Job) -> None:
        """Read the job's output until it is gone; enforce the lifetime and resource limits."""
        process = job.process
        assert process.stdout is not None and process.stderr is not None
        readers = [
            asyncio.create_task(self._pump(job, "stdout", process.stdout)),
            asyncio.create_task(self._pump(job, "stderr", process.stderr)),
        ]
        try:
            try:
                job.stopped_by = await asyncio.wait_for(
                    _exited(process, job.limits), self._max_lifetime
                )
            except TimeoutError:
                job.stopped_by = Breach(
                    "tools.sandbox.max_lifetime",
                    f"[killed: ran past the {self._max_lifetime:g} s limit for one command]",
                )
                await self._terminate(process)
            # A limit hit as the command ended still explains how it ended (read before
            # stop(), which refuses every fork from then on).
            job.stopped_by = job.stopped_by or job.limits.breach()
            # Whatever the command left in the background would hold the pipes open; a
            # command at a limit gets no grace.
            _signal(process, signal.SIGKILL)
            job.limits.stop()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_exited(process), DRAIN_TIMEOUT)
            await asyncio.wait(readers, timeout=DRAIN_TIMEOUT)
            if self._on_exit is not None:
                await self._on_exit()
        finally:
            if process.returncode is None:
                # The supervisor itself was cancelled (the event loop is closing): nobody is
                # left to stop the command, so it goes with its supervisor.
                _signal(process, signal.SIGKILL)
                job.limits.stop()
            for reader in readers:
                reader.cancel()  # nothing more arrives: what the redaction holds can go
            job.output.end()
            await asyncio.shield(job.limits.release())
            job.ended = asyncio.get_running_loop().time()

    async def _pump(self, job: _Job, stream: str, reader: asyncio.StreamReader) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            live = job.output.live
            try:
                read = reader.read(_CHUNK)
                waiting = live is not None and live.waiting(stream)
                chunk = await (asyncio.wait_for(read, STREAM_FLUSH) if waiting else read)
            except TimeoutError:
                if live is not None:
                    live.send_partial(stream)  # redacted already: only the line waited
                continue
            job.output.add(stream, decoder.decode(chunk, final=not chunk), len(chunk))
            if not chunk:
                return

    async def _terminate(self, process: asyncio.subprocess.Process) -> None:
        _signal(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(_exited(process), KILL_GRACE)
        except TimeoutError:
            _signal(process, signal.SIGKILL)
            await _exited(process)

    async def _stop(self, job: _Job) -> None:
        if job.finished:
            return
        await self._terminate(job.process)
        await job.supervisor

    def _collect(
        self, job: _Job, *, timed_out: bool = False, show_id: bool = True
    ) -> CommandResult:
        """The result for what arrived since the last read; a finished job is forgotten."""
        finished = job.finished
        taken = job.output.window.take()
        text = taken.text
        text = text if text.strip() else NO_OUTPUT
        if finished:
            self._jobs.pop(job.id, None)
            if show_id:
                self._collected.add(job.id)
            if job.stopped_by is not None:
                text = f"{text.rstrip()}\n{job.stopped_by.note}"
        end = job.ended if job.ended is not None else asyncio.get_running_loop().time()
        return CommandResult(
            job_id=job.id if show_id else None,
            exit_code=job.process.returncode if finished else None,
            output=text,
            output_bytes=taken.bytes,
            truncated=taken.truncated,
            timed_out=timed_out,
            running=not finished,
            duration_ms=int((end - job.started) * 1000),
            limit=job.stopped_by.setting if finished and job.stopped_by else None,
        )
