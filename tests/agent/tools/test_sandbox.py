"""Each sandbox against real processes: what bubblewrap isolates, and that the fallback does
not (its weakness is asserted, so a change in it is noticed)."""

import asyncio
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.interpreters import SANDBOX_PYTHON

from opencomposer.agent.tools import sandbox as sandbox_module
from opencomposer.agent.tools.sandbox import (
    BubblewrapSandbox,
    FallbackSandbox,
    Sandbox,
    default_masked_paths,
    detect_sandbox,
    probe_bubblewrap,
    shell,
)
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.agent.tools.terminal.git_guard import GitGuard
from opencomposer.agent.tools.terminal.view import view
from opencomposer.config import SandboxSettings


async def run(
    sandbox: Sandbox,
    command: str,
    cwd: Path,
    *,
    network: bool = False,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    base, _ = scrub_environment(os.environ)
    process = await sandbox.spawn(
        command, cwd=cwd, env={**base, **(env or {})}, network=network, stdin=False
    )
    async with asyncio.timeout(10):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on the host's loopback that accepts connections."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


CONNECT = (
    f"{shlex.quote(SANDBOX_PYTHON)} -c "
    "\"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\""
)

# Git without the host's configuration (signing, hooksPath, templates), with an identity.
GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


@pytest.fixture
def repository(workspace: Path) -> Path:
    """The workspace made a git repository on the host."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=workspace, env=env, check=True)
    return workspace


# ---------------------------------------------------------------------------- both kinds


async def test_workspace_is_writable(sandbox: Sandbox, workspace: Path) -> None:
    assert await run(sandbox, "echo hi > made.txt && cat made.txt", workspace) == (0, "hi\n", "")
    assert (workspace / "made.txt").read_text() == "hi\n"


async def test_runs_in_own_session_with_bash(sandbox: Sandbox, workspace: Path) -> None:
    process = await sandbox.spawn("sleep 5", cwd=workspace, env={}, network=False, stdin=False)
    try:
        assert os.getsid(process.pid) == process.pid
        assert os.getpgid(process.pid) == process.pid
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
    assert Path(shell()).name == "bash"


@pytest.mark.parametrize("delays_ms", [(0,) * 10, (0.5, 1, 2, 3, 5, 8, 13)])
async def test_group_kill_at_any_moment_of_the_start_leaves_nothing(
    sandbox: Sandbox, workspace: Path, marker: str, survivors, delays_ms: tuple[float, ...]
) -> None:
    """bwrap arms --die-with-parent only once it runs, so killing bwrap alone in its first
    milliseconds leaves the sandbox running; killing the group takes it, at whatever moment
    of the start the kill lands. A sandbox that outlives the kill keeps the pipes open, so
    the wait is bounded: a hang is a failure, not a stuck suite."""
    hung = 0
    for delay in delays_ms:
        process = await sandbox.spawn(
            f"sleep {marker}", cwd=workspace, env={}, network=False, stdin=False
        )
        time.sleep(delay / 1000)  # blocking: the start goes on in bwrap, not in this loop
        os.killpg(process.pid, signal.SIGKILL)
        try:
            async with asyncio.timeout(5):
                await process.wait()
        except TimeoutError:
            hung += 1
    alive = await survivors(marker)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert (hung, alive) == (0, [])


async def test_resource_limits(sandbox: Sandbox, workspace: Path) -> None:
    code, out, _ = await run(sandbox, "ulimit -c; ulimit -f", workspace)
    # bash reports the file size limit in 1024-byte blocks.
    assert (code, out) == (0, f"0\n{SandboxSettings().max_file_bytes // 1024}\n")


async def test_write_outside_workspace(
    kind: str, sandbox: Sandbox, workspace: Path, outside: Path
) -> None:
    code, _, err = await run(sandbox, f"touch {outside}/escaped", workspace)
    if kind == "bubblewrap":
        assert code == 1 and "Read-only file system" in err
        assert not (outside / "escaped").exists()
    else:  # the fallback does not isolate the filesystem
        assert code == 0 and (outside / "escaped").exists()


async def test_write_to_home(kind: str, sandbox: Sandbox, workspace: Path, outside: Path) -> None:
    code, _, err = await run(
        sandbox, 'touch "$HOME/escaped"', workspace, env={"HOME": str(outside)}
    )
    if kind == "bubblewrap":
        assert code == 1 and "Read-only file system" in err
        assert not (outside / "escaped").exists()
    else:
        assert code == 0 and (outside / "escaped").exists()


async def test_symlink_out_of_workspace(
    kind: str, sandbox: Sandbox, workspace: Path, outside: Path
) -> None:
    (workspace / "link").symlink_to(outside)
    code, _, _ = await run(sandbox, "echo x > link/pwned", workspace)
    if kind == "bubblewrap":
        assert code == 1 and not (outside / "pwned").exists()
    else:
        assert code == 0 and (outside / "pwned").read_text() == "x\n"


async def test_private_tmp(kind: str, sandbox: Sandbox, workspace: Path) -> None:
    name = Path("/tmp") / f"opencomposer-test-{uuid.uuid4().hex}"
    try:
        code, _, _ = await run(sandbox, f"echo secret > {name} && cat {name}", workspace)
        assert code == 0
        assert name.exists() == (kind == "fallback")
    finally:
        name.unlink(missing_ok=True)


async def test_network(kind: str, sandbox: Sandbox, workspace: Path, listener: int) -> None:
    connect = CONNECT.format(port=listener)
    code_off, _, err = await run(sandbox, connect, workspace, network=False)
    code_on, _, _ = await run(sandbox, connect, workspace, network=True)
    assert code_on == 0
    if kind == "bubblewrap":
        assert code_off == 1 and "Error" in err
    else:  # the fallback cannot take the network away
        assert code_off == 0


async def test_credentials_masked(kind: str, make_sandbox, workspace: Path, outside: Path) -> None:
    home, data = outside / "home", outside / "data"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE")
    (home / ".netrc").write_text("machine x password hunter2")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]")
    data.mkdir()
    (data / "traces.db").write_text("traces")
    sandbox = make_sandbox(default_masked_paths(home, data))
    command = f"ls -A {home}/.ssh {home}/.aws {data}; cat {home}/.netrc"
    code, out, _ = await run(sandbox, command, workspace)
    assert code == 0
    if kind == "bubblewrap":
        assert out == f"{data}:\n\n{home}/.aws:\n\n{home}/.ssh:\n"
    else:  # readable: the fallback hides nothing on disk
        assert "id_rsa" in out and "credentials" in out and "traces.db" in out and "hunter2" in out


async def test_git_reads_work_and_writes_fail(
    kind: str, sandbox: Sandbox, repository: Path
) -> None:
    """Under bubblewrap .git is read-only (the user's git would run what a command writes
    there): status, diff and log work, a commit fails with git's own error. The fallback
    commits: it isolates nothing."""
    env = {**os.environ, **GIT_ENV}
    (repository / "f").write_text("a\n")
    subprocess.run(["git", "add", "f"], cwd=repository, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=repository, env=env, check=True)
    reads = "echo b > f && git status --short && git diff --name-only && git log --format=%s"
    assert await run(sandbox, reads, repository, env=GIT_ENV) == (0, " M f\nf\nfirst\n", "")
    code, _, err = await run(
        sandbox, "git commit -qam second && git branch topic", repository, env=GIT_ENV
    )
    log = subprocess.run(
        ["git", "log", "--format=%s"],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if kind == "bubblewrap":
        assert code == 128 and "index.lock': Read-only file system" in err
        assert log == "first\n"
    else:
        assert code == 0 and log == "second\nfirst\n"


async def test_git_hooks_and_config(kind: str, sandbox: Sandbox, repository: Path) -> None:
    """The user's git runs hooks and reads config on the host, outside any sandbox."""
    config = repository / ".git" / "config"
    before = config.read_text()
    hook = repository / ".git" / "hooks" / "pre-commit"
    plant = "echo 'touch pwned' > .git/hooks/pre-commit"
    code_hook, _, err_hook = await run(sandbox, plant, repository, env=GIT_ENV)
    code_config, _, err_config = await run(
        sandbox, "git config core.hooksPath x", repository, env=GIT_ENV
    )
    if kind == "bubblewrap":
        assert code_hook == 1 and "Read-only file system" in err_hook and not hook.exists()
        assert code_config == 255 and "could not lock config file" in err_config
        assert config.read_text() == before
    else:  # the fallback lets a command plant code for the host's git
        assert code_hook == 0 and hook.exists()
        assert code_config == 0 and "hooksPath = x" in config.read_text()


# ---------------------------------------------------------------------------- bubblewrap


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()]


async def test_the_sandbox_init_stays_in_bwraps_process_group(
    bwrap: Path, workspace: Path, marker: str, started
) -> None:
    """What makes the group kill whole: bwrap's child, the init of the sandbox's pid
    namespace, stays in bwrap's process group (bwrap's --new-session would move it out before
    it arms --die-with-parent, the race the test above can only hit under load)."""
    sandbox = BubblewrapSandbox(workspace, bwrap, [])
    process = await sandbox.spawn(
        f"sleep {marker}", cwd=workspace, env={}, network=False, stdin=False
    )
    try:
        assert await started(marker, 3)  # bwrap, the init and the command name the marker
        [init] = _children(process.pid)
        assert os.getpgid(init) == process.pid
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def test_a_command_that_leaves_the_group_dies_with_the_sandbox(
    bwrap: Path, workspace: Path, marker: str, started, survivors
) -> None:
    """A command may call setsid itself; it stays in the sandbox's pid namespace, which dies
    with its init."""
    sandbox = BubblewrapSandbox(workspace, bwrap, [])
    process = await sandbox.spawn(
        f"setsid sleep {marker} & sleep {marker}",
        cwd=workspace,
        env={},
        network=False,
        stdin=False,
    )
    assert await started(marker, 4)  # bwrap, the init and the two commands
    os.killpg(process.pid, signal.SIGKILL)
    async with asyncio.timeout(5):
        await process.wait()
    assert await survivors(marker) == []


async def test_no_controlling_terminal(bwrap: Path, workspace: Path) -> None:
    """Nothing to inject keystrokes into (TIOCSTI): the sandbox's session has no terminal."""
    sandbox = BubblewrapSandbox(workspace, bwrap, [])
    code, _, err = await run(sandbox, "exec 3</dev/tty", workspace)
    assert code != 0 and "No such device or address" in err


async def test_system_is_read_only(bwrap: Path, workspace: Path) -> None:
    sandbox = BubblewrapSandbox(workspace, bwrap, [])
    code, _, err = await run(sandbox, f"touch /etc/opencomposer-{uuid.uuid4().hex}", workspace)
    assert code == 1 and "Read-only file system" in err


async def test_workspace_inside_masked_folder(bwrap: Path, outside: Path) -> None:
    """The data folder is masked, yet a workspace inside it (RL rollouts keep theirs there)
    stays visible and writable: it is bound after the mask."""
    data = outside / "data"
    workspace = data / "rollout" / "ws"
    workspace.mkdir(parents=True)
    (data / "traces.db").write_text("traces")
    sandbox = BubblewrapSandbox(workspace, bwrap, [data])
    code, out, _ = await run(sandbox, f"touch made && ls -A {data} {workspace}", workspace)
    assert (code, out) == (0, f"{data}:\nrollout\n\n{workspace}:\nmade\n")
    assert (workspace / "made").exists()


def test_arguments_order(bwrap: Path, outside: Path, workspace: Path) -> None:
    """The root (read-only host, /tmp's tmpfs, /run emptied), the hidden homes and what is
    shown of them, the masks, the workspace, the masks inside it, the git pins, the seccomp
    program: later mounts cover earlier ones."""
    (outside / ".ssh").mkdir()
    (outside / ".netrc").write_text("")
    masked = [
        outside / ".ssh",
        outside / ".netrc",
        outside / "missing",
        workspace / ".ssh",
        Path("/tmp/anything"),
    ]
    (workspace / ".ssh").mkdir()
    sandbox = BubblewrapSandbox(workspace, bwrap, masked)
    ws = str(workspace)
    seen = view(workspace, masked)
    hidden = [arg for path in seen.hidden for arg in ("--tmpfs", str(path))]
    shown = [
        arg
        for source, shown_at in seen.shown
        for arg in ("--ro-bind-try", str(source), str(shown_at))
    ]
    before = seen.before_workspace()
    assert before[:9] == [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    assert seen.root == before[: len(seen.root)] and "/run" in seen.root
    after_root = before[len(seen.root) :]
    assert after_root[: len(hidden) + len(shown)] == hidden + shown
    assert before[-5:] == [
        "--tmpfs",
        f"{outside}/.ssh",
        "--dev-bind",
        "/dev/null",
        f"{outside}/.netrc",
    ]
    pins = [workspace / ".git"]
    assert sandbox.arguments("make test", cwd=workspace / "sub", network=False,
                             git_pins=pins, extra=["--seccomp", "9"]) == [
        str(bwrap),
        *before,
        "--bind", ws, ws,
        "--tmpfs", f"{ws}/.ssh",
        "--ro-bind-try", f"{ws}/.git", f"{ws}/.git",
        "--unshare-all",
        "--die-with-parent", "--cap-drop", "ALL",
        "--seccomp", "9",
        "--chdir", f"{ws}/sub",
        "--", *sandbox.limits.wrapper, shell(), "-c", "make test",
    ]  # fmt: skip
    assert "--share-net" in sandbox.arguments("x", cwd=workspace, network=True)


async def test_git_folder_cannot_be_swapped(bwrap: Path, repository: Path) -> None:
    """A folder holding mounts can be renamed away and replaced by one with planted hooks;
    .git is a mount point itself, which cannot."""
    sandbox = BubblewrapSandbox(repository, bwrap, [])
    code, _, err = await run(sandbox, "mv .git old", repository)
    assert code == 1 and "Device or resource busy" in err
    assert (repository / ".git" / "config").exists() and not (repository / "old").exists()


def test_git_pins(workspace: Path, tmp_path: Path) -> None:
    """Every git directory whole (the root's, a nested one, one a `.git` file names inside
    the workspace, a bare one), each `.git` file, and the configured hooks folder, made
    empty when missing; a symlinked `.git` through its target, one pointing out of the
    workspace not at all (nothing there is writable)."""
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q"], cwd=workspace, env=env, check=True)
    subprocess.run(
        ["git", "config", "core.hooksPath", "tools/hooks"], cwd=workspace, env=env, check=True
    )
    (workspace / "lib/.git").mkdir(parents=True)
    (workspace / "store/objects").mkdir(parents=True)
    (workspace / "store/refs").mkdir()
    (workspace / "store/HEAD").write_text("ref: refs/heads/main\n")
    (workspace / "wt").mkdir()
    (workspace / "wt/.git").write_text("gitdir: ../store\n")
    (workspace / "outer").mkdir()
    (workspace / "outer/.git").write_text("gitdir: /elsewhere/.git/worktrees/w\n")
    (workspace / "linked").mkdir()
    (workspace / "linked/.git").symlink_to("../lib/.git")
    (workspace / "away").mkdir()
    (workspace / "away/.git").symlink_to(tmp_path)
    guard = GitGuard(workspace, tmp_path / "quarantine")
    pins = guard.prepare()
    guard.started(None)
    assert pins == [
        workspace / name
        for name in (".git", "lib/.git", "outer/.git", "store", "tools/hooks", "wt/.git")
    ]
    assert (workspace / "tools/hooks").is_dir() and not any((workspace / "tools").rglob("*.*"))


def test_probe_works_here(bwrap: Path) -> None:
    works, detail = probe_bubblewrap(bwrap)
    assert works and detail.startswith("bubblewrap ")


def test_probe_reports_why_it_fails(tmp_path: Path) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    assert probe_bubblewrap(broken) == (False, "bwrap: No permissions to create new namespace")
    works, detail = probe_bubblewrap(tmp_path / "absent")
    assert not works and "No such file" in detail


# ---------------------------------------------------------------------------- detection


def test_detect_prefers_bubblewrap(bwrap: Path, workspace: Path, tmp_path: Path) -> None:
    sandbox = detect_sandbox(workspace, tmp_path / "data")
    assert isinstance(sandbox, BubblewrapSandbox) and sandbox.name == "bubblewrap"
    assert "no network" in sandbox.description


def test_detect_falls_back_and_says_why(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(sandbox_module, "find_program", lambda name: None)
    sandbox_module._cached_probe.cache_clear()
    try:
        sandbox = detect_sandbox(workspace, tmp_path / "data")
    finally:
        sandbox_module._cached_probe.cache_clear()
    assert isinstance(sandbox, FallbackSandbox) and sandbox.name == "fallback"
    assert sandbox.description == (
        "fallback (bubblewrap unavailable: bubblewrap (bwrap) not found): NOT isolated; commands "
        "can read and change any file this user can, git hooks included, and reach the network; "
        "only secrets in the environment and output are hidden"
    )
