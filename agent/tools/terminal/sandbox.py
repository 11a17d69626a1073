"""Where commands run: a bubblewrap sandbox when this machine can start one, else a plain
subprocess that says plainly it isolates nothing.

Capability is probed once per process by starting a real sandbox, because bubblewrap is often
installed but unable to create namespaces inside containers. Both sandboxes start the command
in its own session, so the caller can signal the whole process tree through one process
group. Under bubblewrap that group holds `bwrap` and the init of the sandbox's pid namespace,
whose death takes every process in the sandbox along. Signal the group, not the pid: bwrap
arms --die-with-parent only once it runs, so a bwrap killed alone in its first milliseconds
leaves the sandbox running.
"""

import asyncio
import functools
import os
import resource
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from opencomposer.config import SandboxSettings
from opencomposer.paths import find_program, user_config_file

# A command may burn two CPU-hours before SIGXCPU: far past any build or test suite, short
# of a runaway loop left in the background for a day.
CPU_SECONDS = 2 * 60 * 60
# No single file a command writes may exceed this (a runaway log fills the disk otherwise).
MAX_FILE_BYTES = 2 * 1024**3
_PROBE_TIMEOUT = 10.0

# Credential stores under the home folder. They stay readable through the read-only root
# unless overlaid: folders get an empty tmpfs, files /dev/null. /dev/null must be mounted
# with --dev-bind: --ro-bind mounts are nodev, so reading the mask would fail with EACCES, and
# tools that read their config (npm and ~/.npmrc) would break instead of seeing it empty.
# Writes to a masked file vanish, leaving the real one untouched.
HOME_CREDENTIALS = (
    ".ssh", ".aws", ".gnupg", ".azure", ".kube", ".config/gcloud", ".config/gh",
    ".docker/config.json", ".netrc", ".git-credentials", ".npmrc", ".pypirc",
    ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".password-store",
    ".local/share/keyrings",
)  # fmt: skip
# Unix sockets are reachable without a network namespace: the Docker daemon is host root.
DOCKER_SOCKETS = (Path("/run/docker.sock"), Path("/var/run/docker.sock"))

# Read-only root, minimal /dev, the sandbox's own /proc, an empty private /tmp.
_FILESYSTEM = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
# --new-session: no controlling terminal to inject keystrokes into (TIOCSTI).
# --cap-drop ALL: root inside the sandbox gets no more power than an unprivileged user.
_PROCESS = ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]


class Sandbox(Protocol):
    """Starts `bash -c command` with separate stdout and stderr pipes, in its own session."""

    name: str
    """Either "bubblewrap" or "fallback"."""

    description: str
    """One line for users and `doctor`: what the sandbox isolates and what it does not."""

    async def spawn(
        self, command: str, *, cwd: Path, env: Mapping[str, str], network: bool, stdin: bool
    ) -> asyncio.subprocess.Process: ...


@functools.cache
def shell() -> str:
    """bash where installed (the dialect models write), else the POSIX shell."""
    return shutil.which("bash") or "/bin/sh"


def _limit_resources() -> None:
    """Runs in the child before exec; limits are inherited by everything it starts."""
    for which, value in (
        (resource.RLIMIT_CPU, CPU_SECONDS),
        (resource.RLIMIT_FSIZE, MAX_FILE_BYTES),
        (resource.RLIMIT_CORE, 0),
    ):
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, hard))


async def _start(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdin: bool
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_limit_resources,
    )


def default_masked_paths(home: Path, data_dir: Path) -> list[Path]:
    """Everything a command must not read: credential stores, opencomposer's own config and
    data, the user's runtime folder (agent and keyring sockets) and the Docker socket."""
    paths = [home / name for name in HOME_CREDENTIALS]
    paths += [user_config_file().parent, data_dir, *DOCKER_SOCKETS]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    paths.append(Path(runtime))
    return paths


class BubblewrapSandbox:
    """Read-only system, writable workspace but for its git hooks and config, private /tmp,
    credentials hidden, every namespace unshared (no network unless the call allows it)."""

    name = "bubblewrap"
    description = (
        "bubblewrap: read-only system, writable workspace (git hooks and config read-only), "
        "private /tmp, credentials hidden, no network unless allowed"
    )

    def __init__(
        self, workspace_root: Path, bwrap_path: Path, masked_paths: Iterable[Path],
        settings: SandboxSettings | None = None,
    ) -> None:
        self.workspace_root = workspace_root.resolve()
        self.bwrap_path = bwrap_path
        self.masked_paths = list(masked_paths)
        self.settings = settings or SandboxSettings()

    def _masks(self) -> list[str]:
        """Overlay arguments for the masked paths that exist now. Paths under /tmp are
        already hidden by the private /tmp; paths inside the workspace are the user's project."""
        args: list[str] = []
        for real in dict.fromkeys(path.resolve() for path in self.masked_paths):
            if not real.exists() or real.is_relative_to("/tmp"):
                continue
            if real.is_relative_to(self.workspace_root):
                continue
            args += (
                ["--tmpfs", str(real)] if real.is_dir() else ["--dev-bind", "/dev/null", str(real)]
            )
        return args

    def _git_pins(self) -> list[str]:
        """Mounts that keep commands from planting code the user's git runs later on the host:
        hooks and config (core.fsmonitor, core.hooksPath, aliases) are read-only. `.git` is
        bound onto itself, as a mount point cannot be renamed away and replaced while a folder
        holding one can; a `.git` file (worktree, submodule), whose `gitdir:` picks the
        repository, is read-only. Git inside still commits, branches and diffs; writing config
        fails. Not covered: symbolic links (a mount lands on their target, and the link itself
        stays replaceable), a hooks folder made later, a core.hooksPath inside the workspace,
        submodules under .git/modules, and a planted .git/commondir (git then reads config
        and hooks where it points)."""
        git = self.workspace_root / ".git"
        if git.is_symlink() or not git.exists():
            return []
        if git.is_file():
            return ["--ro-bind", str(git), str(git)]
        args = ["--bind", str(git), str(git)]
        for path in (git / "hooks", git / "config"):
            if path.exists() and not path.is_symlink():
                args += ["--ro-bind", str(path), str(path)]
        return args

    def arguments(self, command: str, *, cwd: Path, network: bool) -> list[str]:
        """The full bwrap command line. Order matters: later mounts cover earlier ones, so the
        masks come after the /tmp tmpfs, the workspace after both, staying visible and
        writable even when it lies under /tmp or inside a masked folder, and the git pins
        after the workspace."""
        workspace = str(self.workspace_root)
        return [
            str(self.bwrap_path),
            *_FILESYSTEM,
            *self._masks(),
            "--bind", workspace, workspace,
            *self._git_pins(),
            "--unshare-all",
            *(["--share-net"] if network else []),
            *_PROCESS,
            "--chdir", str(cwd),
            "--", shell(), "-c", command,
        ]  # fmt: skip

    async def spawn(
        self, command: str, *, cwd: Path, env: Mapping[str, str], network: bool, stdin: bool
    ) -> asyncio.subprocess.Process:
        # The environment reaches the command through bwrap's own environment rather than
        # --setenv: argv is readable by every local user in /proc/PID/cmdline, environ only by
        # the same user.
        argv = self.arguments(command, cwd=cwd, network=network)
        return await _start(argv, cwd=cwd, env=env, stdin=stdin)


class FallbackSandbox:
    """A plain subprocess: own session, scrubbed environment, resource limits. It cannot
    isolate the filesystem or the network, nor keep the workspace's git hooks and config
    read-only, so a command can plant code that the user's git later runs on the host."""

    name = "fallback"

    def __init__(self, reason: str = "", settings: SandboxSettings | None = None) -> None:
        self.settings = settings or SandboxSettings()
        why = f" ({reason})" if reason else ""
        self.description = (
            f"fallback{why}: NOT isolated; commands can read and change any file this user "
            "can, git hooks included, and reach the network; only secrets in the environment "
            "and output are hidden"
        )

    async def spawn(
        self, command: str, *, cwd: Path, env: Mapping[str, str], network: bool, stdin: bool
    ) -> asyncio.subprocess.Process:
        return await _start([shell(), "-c", command], cwd=cwd, env=env, stdin=stdin)


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


def detect_sandbox(workspace_root: Path, data_dir: Path,
                   settings: SandboxSettings | None = None) -> Sandbox:
    """Bubblewrap when it can start a sandbox here, else the fallback, whose description
    carries the reason. The probe runs once per process."""
    bwrap, works, detail = _cached_probe()
    if works and bwrap is not None:
        return BubblewrapSandbox(workspace_root, bwrap, default_masked_paths(Path.home(), data_dir),
                                 settings)
    return FallbackSandbox(f"bubblewrap unavailable: {detail}", settings)
