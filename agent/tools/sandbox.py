"""Where commands run: a bubblewrap sandbox when this machine can start one, else a plain
subprocess that says plainly it isolates nothing.

Capability is probed once per process by starting a real sandbox, because bubblewrap is often
installed but unable to create namespaces inside containers. Both sandboxes start the command
in its own session, so the caller can signal the whole process tree through one process
group. Under bubblewrap that group holds `bwrap` and the init of the sandbox's pid namespace,
whose death takes every process in the sandbox along. Signal the group, not the pid: bwrap
arms --die-with-parent only once it runs, so a bwrap killed alone in its first milliseconds
leaves the sandbox running. Every command runs under the resource limits of
`terminal/limits.py`, taken on by the process we start before it execs the sandbox.

What a command sees of the host's files is `terminal/view.py`'s business; what it may not
change in the workspace's git (every git directory, hooks folder and git config read-only, and
what it makes neutralized afterwards) is `terminal/git_guard.py`'s; the system calls it may not
make (the kernel's keyrings), `terminal/seccomp.py`'s; how an isolated network reaches the
internet, `terminal/isolated_network.py`'s.
"""

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from opencomposer.agent.tools.terminal import isolated_network
from opencomposer.agent.tools.terminal.git_guard import GitGuard
from opencomposer.agent.tools.terminal.limits import CommandLimits, ResourceLimits
from opencomposer.agent.tools.terminal.seccomp import filter_fd, keyring_filter
from opencomposer.agent.tools.terminal.view import view
from opencomposer.config import SandboxSettings
from opencomposer.paths import default_home, find_program, user_config_file

_PROBE_TIMEOUT = 10.0

# Credential stores under the home folder, masked wherever something shows them (the home is
# hidden, but a toolchain shown from it, an exposed folder or a workspace may hold them).
HOME_CREDENTIALS = (
    ".ssh", ".aws", ".gnupg", ".azure", ".kube", ".config/gcloud", ".config/gh",
    ".docker/config.json", ".netrc", ".git-credentials", ".config/git/credentials", ".npmrc",
    ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials",
    ".password-store", ".local/share/keyrings", ".ray/auth_token",
)  # fmt: skip

# The probe's sandbox: read-only root, minimal /dev, the sandbox's own /proc.
_FILESYSTEM = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
# --cap-drop ALL: root inside the sandbox gets no more power than an unprivileged user.
# No --new-session: bwrap's child calls setsid() before it forks the sandbox's init and arms
# --die-with-parent only after, so a group kill landing between the two missed the whole
# sandbox, which then ran on, detached. The sandbox has no controlling terminal to inject
# keystrokes into (TIOCSTI) without it: `_start` makes bwrap a session leader with none, and
# pipes for stdio.
_PROCESS = ["--die-with-parent", "--cap-drop", "ALL"]


@dataclass(frozen=True)
class Mount:
    """A host folder shown at a path of its own inside the sandbox (a benchmark's verifier
    sees its tests at /tests and writes its reward under /logs/verifier, as in Harbor)."""

    source: Path
    target: Path
    writable: bool = False


class Sandbox(Protocol):
    """Starts `bash -c command` with separate stdout and stderr pipes, in its own session."""

    name: str
    """Either "bubblewrap" or "fallback"."""

    description: str
    """One line for users and `doctor`: what the sandbox isolates and what it does not."""

    limits: ResourceLimits
    """What every command may use, and how this machine enforces it."""

    @property
    def guard(self) -> GitGuard | None:
        """Keeps commands from changing what the user's git runs; None where the sandbox
        cannot (the fallback isolates no files)."""
        ...

    async def spawn(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        network: bool,
        stdin: bool,
        limits: CommandLimits | None = None,
    ) -> asyncio.subprocess.Process:
        """`limits` comes from `self.limits.open()`, and the caller releases it once the
        command has ended; without it only the per-process rlimits apply (a cgroup would
        have nobody to watch and remove it)."""
        ...


@functools.cache
def shell() -> str:
    """bash where installed (the dialect models write), else the POSIX shell."""
    return shutil.which("bash") or "/bin/sh"


async def _start(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: bool,
    limits: CommandLimits,
    pass_fds: Sequence[int] = (),
) -> asyncio.subprocess.Process:
    """The command joins its cgroups and takes its rlimits before it runs: nothing it starts
    escapes them, everything it starts inherits both. `pass_fds` stay open in it (bwrap's
    seccomp program, its info and block pipes)."""
    return await asyncio.create_subprocess_exec(
        *limits.wrap(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=limits.preexec_fn,
        pass_fds=tuple(pass_fds),
    )


def default_masked_paths(home: Path, data_dir: Path, hidden: Iterable[Path] = ()) -> list[Path]:
    """Everything a command must not read: credential stores, opencomposer's own config and
    data, the user's runtime folder (agent and keyring sockets, wherever it lies: the view
    empties /run already), and what the caller hides besides (`tools.sandbox.hide`)."""
    paths = [home / name for name in HOME_CREDENTIALS]
    paths += [user_config_file().parent, data_dir, *hidden]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    paths.append(Path(runtime))
    return paths


class BubblewrapSandbox:
    """Read-only system with its secrets masked, the users' homes hidden but for toolchains,
    Python and git config, credentials and opencomposer's data masked wherever they are,
    private /tmp, writable workspace with every git directory, hooks folder and git config in
    it read-only, every namespace unshared (no network unless the call allows it)."""

    name = "bubblewrap"
    description = (
        "bubblewrap: read-only system (password, sudo and host key files masked), home "
        "folders hidden except toolchains, Python and git config, credentials and "
        "opencomposer data masked, private /tmp, writable workspace with .git, git hooks and "
        "git config read-only (what commands plant there is moved aside), no network unless "
        "allowed"
    )

    def __init__(
        self,
        workspace_root: Path,
        bwrap_path: Path,
        masked_paths: Iterable[Path],
        settings: SandboxSettings | None = None,
        quarantine: Path | None = None,
        mounts: Sequence[Mount] = (),
    ) -> None:
        """`quarantine`: where the git guard keeps what it moves out of the workspace
        (default: under the data folder). `mounts`: bound last, over everything else."""
        self.workspace_root = workspace_root.resolve()
        self.bwrap_path = bwrap_path
        self.masked_paths = list(masked_paths)
        self.mounts = list(mounts)
        self.settings = settings or SandboxSettings()
        self.limits = ResourceLimits(self.settings, user_namespace=True)
        self.guard = GitGuard(self.workspace_root, quarantine or default_home() / "quarantine")

    def arguments(
        self,
        command: str,
        *,
        cwd: Path,
        network: bool,
        git_pins: Sequence[Path] = (),
        extra: Sequence[str] = (),
    ) -> list[str]:
        """The full bwrap command line. Order matters: later mounts cover earlier ones. The
        view's root comes first (the host's or the system's folders, private /tmp, empty
        /run), then the hidden homes, what is shown from them, the masks, then the workspace,
        visible and writable even when it lies in a hidden or masked place, the masks inside
        it, the git pins (`GitGuard.prepare`), bound read-only onto themselves (a mount point
        cannot be renamed or removed, so they cannot be swapped for a planted copy either),
        and last the caller's mounts. `extra`: options for this start alone (the seccomp
        program's descriptor, an isolated network's pipes). With `network`, the host's
        network is shared unless the settings isolate it (`extra` then carries the pipes)."""
        workspace = str(self.workspace_root)
        seen = view(
            self.workspace_root,
            self.masked_paths,
            self.settings.expose,
            name=self.settings.view,
            by_entry=bool(self.mounts),
        )
        pins = [arg for path in git_pins for arg in ("--ro-bind-try", str(path), str(path))]
        mounts = [
            arg
            for mount in self.mounts
            for arg in (
                "--bind" if mount.writable else "--ro-bind",
                str(mount.source),
                str(mount.target),
            )
        ]
        shared = network and self.settings.network == "host"
        return [
            str(self.bwrap_path),
            *seen.before_workspace(),
            "--bind", workspace, workspace,
            *seen.after_workspace(),
            *pins,
            *mounts,
            *(["--remount-ro", "/"] if seen.read_only_root else []),
            "--unshare-all",
            *(["--share-net"] if shared else []),
            *_PROCESS,
            *extra,
            "--chdir", str(cwd),
            "--", *self.limits.wrapper, shell(), "-c", command,
        ]  # fmt: skip

    async def spawn(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        network: bool,
        stdin: bool,
        limits: CommandLimits | None = None,
        pass_fds: Sequence[int] = (),
    ) -> asyncio.subprocess.Process:
        """`pass_fds`: descriptors the command inherits (the bench's verifier hands its
        scripts a pipe)."""
        # The environment reaches the command through bwrap's own environment rather than
        # --setenv: argv is readable by every local user in /proc/PID/cmdline, environ only by
        # the same user.
        pins = await self._prepare()
        pipes = None
        program = keyring_filter()
        fds: list[int] = []
        try:
            extra: list[str] = []
            if program is not None:
                fds.append(filter_fd(program))
                extra += ["--seccomp", str(fds[-1])]
            if network and self.settings.network == "isolated":
                pipes = isolated_network.plumbing(shell())
                extra += pipes.bwrap_arguments()
                fds += pipes.child_fds
                command = pipes.command(command)
            argv = await asyncio.to_thread(
                self.arguments, command, cwd=cwd, network=network, git_pins=pins, extra=extra
            )
            process = await _start(
                argv,
                cwd=cwd,
                env=env,
                stdin=stdin,
                limits=limits or self.limits.per_process(),
                pass_fds=[*fds, *pass_fds],
            )
        except BaseException:
            self.guard.started(None)
            if pipes is not None:
                pipes.close()
            raise
        finally:
            if fds and program is not None:
                os.close(fds[0])  # the seccomp program: bwrap has read it, or never will
        self.guard.started(process)
        if pipes is not None:
            try:
                await isolated_network.connect(process, pipes)
            except BaseException:
                kill_group(process)
                raise
        return process

    async def _prepare(self) -> list[Path]:
        """The guard's pins, walked in a worker thread (tens of milliseconds on a large
        tree). A caller cancelled meanwhile still ends the preparation it began, so that the
        guard does not wait forever for a command that never starts."""
        preparing = asyncio.ensure_future(asyncio.to_thread(self.guard.prepare))
        try:
            return await asyncio.shield(preparing)
        except asyncio.CancelledError:

            def finish(done: "asyncio.Future[list[Path]]") -> None:
                if not done.cancelled() and done.exception() is None:
                    self.guard.started(None)

            preparing.add_done_callback(finish)
            raise


def kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL a started sandbox's whole group: bwrap and the init of its pid namespace,
    whose death takes every process inside along."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class FallbackSandbox:
    """A plain subprocess: own session, scrubbed environment, resource limits. It cannot
    isolate the filesystem or the network, nor keep the workspace's git hooks and config
    read-only, so a command can plant code that the user's git later runs on the host."""

    name = "fallback"
    guard = None

    def __init__(self, reason: str = "", settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        self.limits = ResourceLimits(self.settings, user_namespace=False)
        why = f" ({reason})" if reason else ""
        self.description = (
            f"fallback{why}: NOT isolated; commands can read and change any file this user "
            "can, git hooks included, and reach the network; only secrets in the environment "
            "and output are hidden"
        )

    async def spawn(
        self,
        command: str,
        *,
        cwd: Path,
        env: Mapping[str, str],
        network: bool,
        stdin: bool,
        limits: CommandLimits | None = None,
    ) -> asyncio.subprocess.Process:
        return await _start(
            [shell(), "-c", command],
            cwd=cwd,
            env=env,
            stdin=stdin,
            limits=limits or self.limits.per_process(),
        )


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def probe_bubblewrap(bwrap: Path | None = None) -> tuple[bool, str]:
    """Start a real sandbox with the isolation commands get (read-only root, every namespace
    unshared) running `true`. Returns whether it worked and a detail: bwrap's version when
    it did, the reason when it did not."""
    bwrap = bwrap or find_program("bwrap")
    if bwrap is None:
        return False, "bubblewrap (bwrap) not found"
    argv = [str(bwrap), *_FILESYSTEM, "--unshare-all", *_PROCESS, "true"]
    try:
        probe = _run(argv)
        if probe.returncode != 0:
            return False, _first_line(probe.stderr) or f"{bwrap} exited with {probe.returncode}"
        return True, _first_line(_run([str(bwrap), "--version"]).stdout) or str(bwrap)
    except subprocess.TimeoutExpired:
        return False, f"{bwrap} did not finish within {_PROBE_TIMEOUT:g} s"
    except OSError as exc:
        return False, f"{bwrap}: {exc.strerror or exc}"


@functools.cache
def _cached_probe() -> tuple[Path | None, bool, str]:
    bwrap = find_program("bwrap")
    works, detail = probe_bubblewrap(bwrap)
    return bwrap, works, detail


def detect_sandbox(
    workspace_root: Path, data_dir: Path, settings: SandboxSettings | None = None
) -> Sandbox:
    """Bubblewrap when it can start a sandbox here, else the fallback, whose description
    carries the reason. The probe runs once per process."""
    bwrap, works, detail = _cached_probe()
    if works and bwrap is not None:
        return BubblewrapSandbox(
            workspace_root,
            bwrap,
            default_masked_paths(Path.home(), data_dir, settings.hide if settings else ()),
            settings,
            quarantine=data_dir / "quarantine",
        )
    return FallbackSandbox(f"bubblewrap unavailable: {detail}", settings)
