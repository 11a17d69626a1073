"""Resource exhaustion (finding 4): fork bombs, thread bombs, memory hogs and runaway files,
against real bubblewrap, the real cgroups of this machine and real rlimits.

Each attack runs with small limits (64 processes, 256 MiB, 1 MiB files) so it is quick. For
a bomb we check that it is killed with the limit named in its output, that no process of it
is left (its marker in /proc), that its cgroup is gone, and that the host stayed responsive:
the event loop ticks and a trivial host command runs meanwhile (both recorded with
`record_property`; the bound asserted is generous, one tick a second on average). Where this
machine has no usable cgroup, the bomb tests skip (a real bomb there would take the machine
down); the rlimit fallback, forced, is tested everywhere.
"""

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from support.interpreters import SANDBOX_PYTHON
from support.sandbox_fixtures import processes_with

from opencomposer.agent.tools.sandbox import (
    BubblewrapSandbox,
    FallbackSandbox,
    Sandbox,
    default_masked_paths,
)
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.agent.tools.terminal.jobs import CommandResult, JobManager
from opencomposer.agent.tools.terminal.limits import PREFIX, Cgroups, ResourceLimits, find_cgroups
from opencomposer.config import SandboxSettings
from opencomposer.paths import find_program
from opencomposer.redact import Redactor

pytestmark = pytest.mark.timeout(120)

MiB = 1024**2
SMALL = SandboxSettings(max_processes=64, max_memory_bytes=256 * MiB, max_file_bytes=MiB)
PROCESSES = "tools.sandbox.max_processes"
MEMORY = "tools.sandbox.max_memory_bytes"
PY = shlex.quote(SANDBOX_PYTHON)

# Each bomb names MARKER in its command line, which every process it forks inherits.
BOMBS = {
    # The finding's bomb; the shell stays, so the limit, not the shell's exit, ends it.
    "bash": "b(){ b|b & }; b; sleep 60 # MARKER",
    "python fork": PY + " -c 'import os\nwhile True:\n try: os.fork()\n except OSError: pass'"
    " MARKER",
    "threads": PY + " -c 'import threading, time\nwhile True:\n try: threading.Thread("
    "target=time.sleep, args=(60,), daemon=True).start()\n except RuntimeError:"
    " pass' MARKER",
    # Leaves the command's session and process group, and forks from there.
    "setsid": "setsid -f bash -c 'b(){ b|b & }; b; sleep 60 # MARKER'; sleep 60 # MARKER",
    "double fork": "( ( b(){ b|b & }; b; sleep 60 # MARKER\n) & ); sleep 60 # MARKER",
}


@pytest.fixture(scope="module")
def cgroups() -> Cgroups:
    found = find_cgroups()
    if found.pids is None or found.memory is None:
        pytest.skip(f"no usable pids and memory cgroups here: {found.reason}")
    return found


@pytest.fixture(params=["bubblewrap", "fallback"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = (tmp_path / "workspace").resolve()
    folder.mkdir()
    return folder


def make_sandbox(
    kind: str,
    request: pytest.FixtureRequest,
    workspace: Path,
    tmp_path: Path,
    settings: SandboxSettings = SMALL,
) -> Sandbox:
    if kind == "fallback":
        return FallbackSandbox(settings=settings)
    masked = default_masked_paths(Path.home(), tmp_path / "data")
    return BubblewrapSandbox(workspace, request.getfixturevalue("bwrap"), masked, settings)


@pytest.fixture
async def jobs(
    kind: str, request: pytest.FixtureRequest, workspace: Path, tmp_path: Path
) -> AsyncIterator[JobManager]:
    env, _ = scrub_environment(os.environ)
    manager = JobManager(
        make_sandbox(kind, request, workspace, tmp_path), workspace, env, Redactor()
    )
    yield manager
    await manager.close()


@pytest.fixture
def marker() -> str:
    return f"bomb-{uuid.uuid4().hex}"


def our_cgroups() -> list[Path]:
    """Cgroups this test process has made and not removed."""
    return [
        child
        for parent in find_cgroups().folders
        for child in parent.glob(f"{PREFIX}{os.getpid()}-*")
    ]


class Responsiveness:
    """While an attack runs: how often the event loop ticks, and how long a trivial host
    command takes."""

    TICK = 0.05

    def __init__(self) -> None:
        self.ticks = 0
        self.longest_gap = 0.0
        self.host_command: list[float] = []

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.TICK)
            now = time.monotonic()
            self.ticks += 1
            self.longest_gap = max(self.longest_gap, now - last)
            last = now

    async def _host(self) -> None:
        while True:
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec("true")
            await process.wait()
            self.host_command.append(time.monotonic() - started)
            await asyncio.sleep(0.2)

    async def during(
        self,
        attack: Callable[[], "asyncio.Future[CommandResult]"],
        record: Callable[[str, object], None],
    ) -> CommandResult:
        tasks = [asyncio.create_task(self._tick()), asyncio.create_task(self._host())]
        started = time.monotonic()
        try:
            result = await attack()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        elapsed = time.monotonic() - started
        record("attack_seconds", round(elapsed, 3))
        record("event_loop_ticks", self.ticks)
        record("longest_tick_gap_seconds", round(self.longest_gap, 3))
        record("host_true_seconds_max", round(max(self.host_command, default=0.0), 3))
        # Generous: the loop must tick at least once a second on average.
        assert self.ticks >= int(elapsed), (self.ticks, elapsed)
        return result


async def assert_gone(marker: str) -> None:
    """No process of the attack left, and no cgroup of ours (3 s for the dying to leave)."""
    deadline = time.monotonic() + 3
    while (processes_with(marker) or our_cgroups()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert processes_with(marker) == []
    assert our_cgroups() == []


# ---------------------------------------------------------------------------- bombs


@pytest.mark.parametrize("bomb", BOMBS)
async def test_bomb_is_killed_and_leaves_nothing(
    cgroups: Cgroups,
    jobs: JobManager,
    workspace: Path,
    bomb: str,
    marker: str,
    record_property: Callable[[str, object], None],
) -> None:
    command = BOMBS[bomb].replace("MARKER", marker)
    async with asyncio.timeout(60):
        result = await Responsiveness().during(
            lambda: jobs.run(command, cwd=workspace, timeout=30), record_property
        )
    assert (result.running, result.limit) == (False, PROCESSES)
    assert result.output.endswith(
        "[killed: reached the limit of 64 processes (tools.sandbox.max_processes)]"
    )
    await assert_gone(marker)


async def test_background_bomb_is_killed(
    cgroups: Cgroups,
    jobs: JobManager,
    workspace: Path,
    marker: str,
    record_property: Callable[[str, object], None],
) -> None:
    async def attack() -> CommandResult:
        started = await jobs.run(
            BOMBS["bash"].replace("MARKER", marker), cwd=workspace, background=True
        )
        if not started.running:
            return started
        assert started.job_id is not None
        return await jobs.output(started.job_id, wait=30)

    async with asyncio.timeout(60):
        result = await Responsiveness().during(attack, record_property)
    assert (result.running, result.limit) == (False, PROCESSES)
    assert result.output.endswith("(tools.sandbox.max_processes)]")
    await assert_gone(marker)


async def test_bomb_whose_shell_exits_at_once_leaves_nothing(
    cgroups: Cgroups, jobs: JobManager, workspace: Path, marker: str
) -> None:
    """The classic `:(){ :|:& };:` returns at once; what it left forking dies with it."""
    async with asyncio.timeout(60):
        result = await jobs.run(f":(){{ :|:& }};: # {marker}", cwd=workspace, timeout=30)
    assert not result.running and result.limit in (None, PROCESSES)
    await assert_gone(marker)


async def test_the_sandbox_cannot_leave_its_cgroup(
    cgroups: Cgroups, jobs: JobManager, kind: str, workspace: Path, marker: str
) -> None:
    """Moving itself to the parent cgroup would free the command from its limit; bounded to
    100 sleeps, so a successful escape fails the test instead of flooding the machine."""
    if kind == "fallback":
        pytest.skip("the fallback isolates nothing: a root command there can move itself")
    escape = " ".join(f"echo 0 > {folder}/cgroup.procs;" for folder in cgroups.folders)
    command = f"{escape} for i in $(seq 100); do sleep 60 & done; wait # {marker}"
    async with asyncio.timeout(60):
        result = await jobs.run(command, cwd=workspace, timeout=30)
    assert "Read-only file system" in result.output
    assert result.limit == PROCESSES
    await assert_gone(marker)


async def test_escaped_leftovers_are_stopped_when_the_command_ends(
    cgroups: Cgroups, jobs: JobManager, workspace: Path, marker: str
) -> None:
    """A process that left the command's session outlives a process-group kill; the
    cgroup still holds it."""
    async with asyncio.timeout(30):
        result = await jobs.run(
            f"setsid -f bash -c 'sleep 60 # {marker}'; echo started", cwd=workspace
        )
    assert (result.exit_code, result.output, result.limit) == (0, "started\n", None)
    await assert_gone(marker)


async def test_memory_hog_is_stopped(cgroups: Cgroups, jobs: JobManager, workspace: Path) -> None:
    hog = f"{PY} -c 'x = bytearray(512 * 1024 * 1024); print(\"allocated\")'"
    async with asyncio.timeout(60):
        result = await jobs.run(hog, cwd=workspace, timeout=30)
    assert "allocated" not in result.output
    assert result.limit == MEMORY, result.output
    assert result.output.endswith("reached 256 MiB (tools.sandbox.max_memory_bytes)]")
    assert our_cgroups() == []


async def test_many_processes_in_small_pieces_add_up(
    cgroups: Cgroups, jobs: JobManager, workspace: Path, marker: str
) -> None:
    """Sixteen processes of 32 MiB each: none is large, together they pass 256 MiB."""
    piece = f"{PY} -c 'import time; x = bytearray(32 * 1024 * 1024); time.sleep(60)' {marker}"
    command = f"for i in $(seq 16); do {piece} & done; wait"
    async with asyncio.timeout(60):
        result = await jobs.run(command, cwd=workspace, timeout=30)
    assert result.limit == MEMORY, result.output
    await assert_gone(marker)


async def test_filling_the_private_tmp_counts_as_memory(
    cgroups: Cgroups, jobs: JobManager, kind: str, workspace: Path
) -> None:
    """The sandbox's /tmp is a tmpfs, held in memory: 400 files of 1 MB, each under the file
    size limit, pass 256 MiB together."""
    if kind == "fallback":
        pytest.skip("the fallback's /tmp is the host's")
    fill = "for i in $(seq 400); do head -c 1000000 /dev/zero > /tmp/f$i || break; done"
    async with asyncio.timeout(60):
        result = await jobs.run(fill, cwd=workspace, timeout=30)
    assert result.limit == MEMORY, result.output
    assert our_cgroups() == []


def test_cgroups_of_a_dead_server_are_swept(cgroups: Cgroups) -> None:
    """A server killed mid-command leaves its commands' empty cgroups; the next one to look
    for cgroups removes them, and leaves a live process's alone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "30"])
    try:
        made = [
            parent / f"{PREFIX}{pid}-left"
            for parent in cgroups.folders
            for pid in (dead.pid, live.pid)
        ]
        for folder in made:
            folder.mkdir()
        find_cgroups.cache_clear()
        assert find_cgroups() == cgroups
        assert [folder.exists() for folder in made] == [False, True] * len(cgroups.folders)
    finally:
        live.kill()
        live.wait()
        for folder in made:
            if folder.exists():
                folder.rmdir()


# ---------------------------------------------------------------------------- every mode


async def test_large_file_fails_without_filling_the_disk(jobs: JobManager, workspace: Path) -> None:
    writer = (
        f'{PY} -c \'f = open("big", "wb")\nfor _ in range(4): f.write(bytes(1 << 20))\''
        " 2>&1 | tail -1; head -c 3000000 /dev/zero > big2; echo $?;"
        " ulimit -f unlimited 2>/dev/null || echo cannot raise"
    )
    async with asyncio.timeout(30):
        result = await jobs.run(writer, cwd=workspace)
    # bash's own report of the killed `head` ("File size limit exceeded") may land anywhere
    # among the command's lines: it is written by the shell, not in order with them.
    lines = [line for line in result.output.splitlines() if "File size limit" not in line]
    assert "OSError: [Errno 27] File too large" in lines[0]
    assert lines[-2:] == ["153", "cannot raise"]  # 128 + SIGXFSZ for head
    assert (workspace / "big").stat().st_size == MiB
    assert (workspace / "big2").stat().st_size == MiB


async def test_build_like_command_is_unaffected(jobs: JobManager, workspace: Path) -> None:
    build = (
        "for i in $(seq 20); do (echo $i > out$i; sleep 0.2) & done; wait;"
        f" {PY} -c 'import subprocess; [subprocess.run([\"true\"]) for _ in range(20)]';"
        " cat out* | wc -l"
    )
    async with asyncio.timeout(30):
        result = await jobs.run(build, cwd=workspace)
    assert (result.exit_code, result.output.strip(), result.limit) == (0, "20", None)


async def test_forced_rlimit_fallback(workspace: Path) -> None:
    """No cgroup (forced): memory is an address-space rlimit per process, so a hog fails to
    allocate instead; CPU time and file size are rlimits as everywhere; and the report says
    the process limit is not enforced."""
    settings = SMALL.model_copy(update={"max_cpu_seconds": 1})
    sandbox = FallbackSandbox(settings=settings)
    sandbox.limits = ResourceLimits(
        settings, user_namespace=False, cgroups=Cgroups(reason="forced by the test")
    )
    described = {limit.name: limit for limit in sandbox.limits.describe()}
    assert described["processes"].enforced_by is None
    assert "NOT enforced: no cgroup (forced by the test)" in described["processes"].detail
    assert described["memory"].enforced_by == "rlimit, per process (address space)"
    assert [p.split(":")[0] for p in sandbox.limits.problems()] == ["processes", "memory"]
    env, _ = scrub_environment(os.environ)
    jobs = JobManager(sandbox, workspace, env, Redactor())
    try:
        async with asyncio.timeout(30):
            hog = await jobs.run(
                f"{PY} -c 'x = bytearray(512 * 1024 * 1024)' 2>&1 | tail -1", cwd=workspace
            )
            spin = await jobs.run(f"{PY} -c 'while True: pass'", cwd=workspace)
            limits = await jobs.run("ulimit -v; ulimit -f; ulimit -t; ulimit -c", cwd=workspace)
    finally:
        await jobs.close()
    assert hog.output == "MemoryError\n"
    assert spin.exit_code in (-9, -24)  # SIGKILL at the hard limit (or SIGXCPU first)
    assert limits.output.split() == ["262144", "1024", "1", "0"]
    assert our_cgroups() == []


NPROC_PROBE = """
import asyncio, os, sys
from pathlib import Path
from opencomposer.agent.tools.terminal.jobs import JobManager
from opencomposer.agent.tools.sandbox import BubblewrapSandbox
from opencomposer.config import SandboxSettings
from opencomposer.redact import Redactor

FORKS = '''import os, time
kids = []
while len(kids) < 200:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
print(len(kids))
for kid in kids:
    os.kill(kid, 9)
'''

async def main(workspace, bwrap, python):
    settings = SandboxSettings(max_processes=64)
    sandbox = BubblewrapSandbox(Path(workspace), Path(bwrap), [], settings)
    limit = next(l for l in sandbox.limits.describe() if l.name == "processes")
    print(limit.enforced_by)
    (Path(workspace) / "forks.py").write_text(FORKS)
    jobs = JobManager(sandbox, Path(workspace), {"PATH": os.environ["PATH"]}, Redactor())
    result = await jobs.run(f"{python} forks.py", cwd=Path(workspace), timeout=30)
    print(result.output.strip())
    await jobs.close()

asyncio.run(main(*sys.argv[1:]))
"""


def test_process_rlimit_in_the_user_namespace_as_an_unprivileged_user(
    bwrap: Path, request: pytest.FixtureRequest
) -> None:
    """As an unprivileged user without a cgroup of its own, RLIMIT_NPROC set inside the
    sandbox's user namespace counts the sandbox's processes only (kernel >= 5.14), however
    many the user has elsewhere. Runs as `nobody` when the tests run as root."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to run as nobody")
    as_user = (
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    )
    if find_program("prlimit") is None:
        pytest.skip("prlimit (util-linux) not found")
    # The forks run on the system's Python: the tests' own may lie in a folder only root reads.
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None:
        pytest.skip("no system python3 for the forks")
    # Outside /tmp, which the sandbox replaces, and readable by `nobody`.
    folder = Path(tempfile.mkdtemp(prefix="opencomposer-test-", dir="/var/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    folder.chmod(0o755)
    workspace = folder / "workspace"
    workspace.mkdir()
    if as_user:
        os.chown(workspace, 65534, 65534)
    script = folder / "probe.py"
    script.write_text(NPROC_PROBE)
    # The user's other processes: they must not count against the sandbox's limit.
    others = [subprocess.Popen([*as_user, "sleep", "30"]) for _ in range(80)]
    try:
        probe = subprocess.run(
            [*as_user, sys.executable, str(script), str(workspace), str(bwrap), system_python],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=workspace,
            env={"PATH": os.environ["PATH"], "HOME": str(workspace)},
        )
    finally:
        for other in others:
            other.kill()
            other.wait()
    assert probe.returncode == 0, probe.stderr
    how, forks = probe.stdout.split("\n")[:2]
    if how.startswith("cgroup"):
        pytest.skip(f"this user gets a cgroup here ({how}); the rlimit is not used")
    assert how == "rlimit in the sandbox's user namespace"
    # 64 tasks: the sandbox's init, the shell or Python, and the forks.
    assert 50 <= int(forks) < 64, probe.stdout
