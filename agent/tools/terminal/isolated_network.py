"""A network of its own for a command that may reach the internet but not this machine.

Sharing the host's network namespace (`bwrap --share-net`) gives a command everything
listening on this machine's loopback: the opencomposer server, a Ray cluster's control
ports, databases and dev servers. An isolated command gets a network namespace of its own
instead, joined to the outside by slirp4netns, a user-mode NAT (the one rootless Podman uses):
its connections leave through ordinary sockets of an unprivileged helper, and
`--disable-host-loopback` refuses the one address (10.0.2.2) through which the namespace could
reach the host's loopback. Services bound to loopback are out of reach; a service listening on
every interface is reachable through the machine's own address, as from anywhere on the
network, so it needs its own authentication.

How the two are joined: bubblewrap reports the sandbox's first process (`--info-fd`); the
command's shell says when it has started (bubblewrap has set up the namespace's loopback by
then) and waits until slirp4netns has configured the namespace's interface. The order
matters: slirp4netns configuring the namespace while bubblewrap sets up its loopback made
bubblewrap fail ("loopback: Failed RTM_NEWADDR", 8 starts in 80 here), also when bubblewrap
was held back with --block-fd, which it reads before that setup. The helper exits when the
pipe we hold open for it closes (`--exit-fd`), once the command has ended or when this process
dies.
"""

import asyncio
import contextlib
import functools
import json
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from opencomposer.agent.tools.terminal.view import RESOLV_CONF, resolver_is_loopback
from opencomposer.paths import find_program

# slirp4netns's built-in DNS forwarder, inside the namespace.
_SLIRP_DNS = "10.0.2.3"
# The namespace's MTU: slirp4netns's recommended value (its throughput rises with it).
_MTU = 65520
# Seconds slirp4netns may take to configure the namespace.
_READY_TIMEOUT = 10.0


# The tasks that end each helper with its command (kept referenced until they are done).
_STOPPERS: set["asyncio.Future[None]"] = set()


class NetworkUnavailable(OSError):
    """An isolated network was asked for and cannot be made here (no slirp4netns)."""


class Plumbing:
    """The pipes between bubblewrap, the command's shell, slirp4netns and us for one
    command: bwrap writes the sandbox's first pid into `info`; the shell writes to `up` once
    it runs, then reads `go`, which we write once the network is configured."""

    def __init__(self) -> None:
        self.info_read, self.info_write = os.pipe()
        self.up_read, self.up_write = os.pipe()
        self.go_read, self.go_write = os.pipe()

    def bwrap_arguments(self) -> list[str]:
        args = ["--info-fd", str(self.info_write)]
        resolver = _resolver_file()
        if resolver is not None:
            args += ["--ro-bind", str(resolver), str(RESOLV_CONF)]
        return args

    def command(self, command: str) -> str:
        """`command` (run by bash) after the handshake, with the handshake's pipes closed."""
        up, go = self.up_write, self.go_read
        return f"printf 1 >&{up}; read -r _ <&{go}; exec {up}>&- {go}<&-; {command}"

    @property
    def child_fds(self) -> tuple[int, int, int]:
        """The ends the sandbox inherits."""
        ends = (self.info_write, self.up_write, self.go_read)
        for fd in ends:
            os.set_inheritable(fd, True)
        return ends

    def close_child_ends(self) -> None:
        for name in ("info_write", "up_write", "go_read"):
            self._close(name)

    def take(self, name: str) -> int:
        """A reading end, handed over: whoever takes it closes it."""
        fd = getattr(self, name)
        setattr(self, name, -1)
        return fd

    def close(self) -> None:
        """Every end still ours. Closing `go` lets a waiting command run (with a loopback
        alone, if the helper never came up)."""
        for name in ("info_read", "info_write", "up_read", "up_write", "go_read", "go_write"):
            self._close(name)

    def _close(self, name: str) -> None:
        fd = getattr(self, name)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
            setattr(self, name, -1)


def plumbing(shell: str) -> Plumbing:
    """The pipes for one command run by `shell`, which must be bash (the handshake names
    descriptors above 9, which POSIX sh may not)."""
    if slirp4netns() is None:
        raise NetworkUnavailable(
            "an isolated network needs slirp4netns (apt-get install slirp4netns)"
        )
    if Path(shell).name != "bash":
        raise NetworkUnavailable(f"an isolated network needs bash to run commands, not {shell}")
    return Plumbing()


@functools.cache
def slirp4netns() -> Path | None:
    return find_program("slirp4netns")


async def connect(process: asyncio.subprocess.Process, pipes: Plumbing) -> None:
    """Give the started sandbox its network, then let its command run. If the sandbox ended
    before its shell started (bwrap failed), there is nothing to connect: the caller reads
    its error. `pipes` is closed either way."""
    try:
        pipes.close_child_ends()
        async with _reading(pipes.take("info_read")) as info:
            report = await info.read()
        async with _reading(pipes.take("up_read")) as up:
            started = await up.read(1)
        if not report or not started:
            return
        helper, exit_write = await _start_helper(json.loads(report)["child-pid"])
        os.write(pipes.go_write, b"1\n")
        stopper = asyncio.ensure_future(_stop_after(process, helper, exit_write))
        _STOPPERS.add(stopper)
        stopper.add_done_callback(_STOPPERS.discard)
    finally:
        pipes.close()


async def _start_helper(pid: int) -> tuple[asyncio.subprocess.Process, int]:
    """slirp4netns attached to the sandbox's namespaces, once it says the interface is up."""
    ready_read, ready_write = os.pipe()
    exit_read, exit_write = os.pipe()
    try:
        helper = await asyncio.create_subprocess_exec(
            str(slirp4netns()),
            "--configure",
            f"--mtu={_MTU}",
            "--disable-host-loopback",
            "--enable-sandbox",
            "--enable-seccomp",
            f"--ready-fd={ready_write}",
            f"--exit-fd={exit_read}",
            f"--userns-path=/proc/{pid}/ns/user",
            str(pid),
            "tap0",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            pass_fds=(ready_write, exit_read),
        )
        os.close(ready_write)
        ready_write = -1
        async with _reading(ready_read) as reader, asyncio.timeout(_READY_TIMEOUT):
            ready_read = -1  # the reader owns it now
            ready = await reader.read(1)
        if ready != b"1":
            helper.kill()
            raise NetworkUnavailable(f"slirp4netns could not configure the network of {pid}")
        return helper, exit_write
    except BaseException:
        os.close(exit_write)
        raise
    finally:
        for fd in (ready_read, ready_write, exit_read):
            if fd >= 0:
                os.close(fd)


async def _stop_after(
    process: asyncio.subprocess.Process, helper: asyncio.subprocess.Process, exit_write: int
) -> None:
    try:
        await process.wait()
    finally:
        os.close(exit_write)
        with contextlib.suppress(ProcessLookupError):
            await helper.wait()


@contextlib.asynccontextmanager
async def _reading(fd: int) -> AsyncIterator[asyncio.StreamReader]:
    """A pipe's reading end read on the event loop (a thread blocked in read() could not be
    called back on a timeout); closed, with `fd`, when the block ends."""
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        yield reader
    finally:
        transport.close()


@functools.cache
def _resolver_file() -> Path | None:
    """A resolv.conf naming slirp4netns's forwarder, where this machine's resolver listens
    on loopback (systemd-resolved): the namespace has a loopback of its own, with nothing on
    it. Made once per process."""
    if not resolver_is_loopback():
        return None
    handle, name = tempfile.mkstemp(prefix="opencomposer-resolv-", suffix=".conf")
    with os.fdopen(handle, "w") as file:
        file.write(f"nameserver {_SLIRP_DNS}\n")
    return Path(name)
