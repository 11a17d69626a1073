"""`opencomposer bench security`, second part: what each guard of the sandbox and of the
bench's grading costs, beside the same run without it.

Sandbox start: the real bwrap command line the harness builds (`BubblewrapSandbox.arguments`)
running `true`, beside the same line without the guard: the seccomp program that closes the
keyrings, the emptied /run and the masks over what the system keeps private, the system view
(an allow-list) beside the host view, an isolated network (slirp4netns) beside none. Then the
view's own computation in Python (the private files' search, refreshed per command). Then one
trial's grading as the bench does it now (the diff and the restore in sandboxes of their own,
the tests under the exit guard) beside its tests alone in their sandbox, the floor of any
grading. Samples alternate between the two sides, so drift on a shared machine falls on both.
"""

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from opencomposer.agent.tools.sandbox import BubblewrapSandbox, Mount, default_masked_paths
from opencomposer.agent.tools.terminal import view as views
from opencomposer.agent.tools.terminal.seccomp import filter_fd, keyring_filter
from opencomposer.agent.tools.terminal.view import ViewName
from opencomposer.bench.rows import Row
from opencomposer.config import SandboxSettings
from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.sandboxed import require_bubblewrap, run_script
from opencomposer.training.eval.task import load_task
from opencomposer.training.eval.verifier import verify
from opencomposer.training.eval.workspace import TrialDirs, build_workspace, changed_lines

Timed = Callable[[], Awaitable[None]]


async def _median_pair(ours: Timed, baseline: Timed, runs: int) -> tuple[float, float]:
    """Median seconds of each, alternating, after one warm-up of each."""
    await ours()
    await baseline()
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(runs):
        for timed, into in ((ours, mine), (baseline, theirs)):
            started = time.perf_counter()
            await timed()
            into.append(time.perf_counter() - started)
    return statistics.median(mine), statistics.median(theirs)


async def _start(argv: list[str], pass_fds: tuple[int, ...] = ()) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, pass_fds=pass_fds
    )
    if await process.wait() != 0:
        raise RuntimeError(f"the sandbox did not start: {' '.join(argv[:8])} ...")


def _without(argv: list[str], masked: set[str]) -> list[str]:
    """`argv` without the mounts of the given paths and without the emptied /run."""
    kept: list[str] = []
    index = 0
    while index < len(argv):
        option = argv[index]
        if option == "--tmpfs" and (argv[index + 1] in masked or argv[index + 1] == "/run"):
            index += 2
        elif option == "--dev-bind" and argv[index + 2] in masked:
            index += 3
        else:
            kept.append(option)
            index += 1
    return kept


async def sandbox_rows(root: Path, runs: int) -> list[Row]:
    bwrap = require_bubblewrap()
    workspace = root / "workspace"
    workspace.mkdir(exist_ok=True)
    masked = default_masked_paths(Path.home(), root / "data")

    def sandbox(view: ViewName = "host") -> BubblewrapSandbox:
        return BubblewrapSandbox(workspace, bwrap, masked, SandboxSettings(view=view))

    program = keyring_filter()
    rows = []

    # Both sides start from arguments made once: what making them costs is the view's row.
    seccomp_fd = "{seccomp fd}"
    extra = ["--seccomp", seccomp_fd] if program else []
    after = sandbox().arguments("true", cwd=workspace, network=False, extra=extra)

    async def guarded() -> None:
        if not program:
            await _start(after)
            return
        fd = filter_fd(program)
        try:
            await _start([str(fd) if arg == seccomp_fd else arg for arg in after], (fd,))
        finally:
            os.close(fd)

    private = {str(path) for path in views.PRIVATE_ENTRIES.find()}
    before = _without(sandbox().arguments("true", cwd=workspace, network=False), private)

    async def unguarded() -> None:
        await _start(before)

    ours, baseline = await _median_pair(guarded, unguarded, runs)
    rows.append(
        Row(
            "sandbox start, host view",
            "without the new guards",
            baseline,
            ours,
            "s",
            f"keyrings closed by seccomp, /run emptied, {len(private)} private system files masked",
        )
    )

    async def system_view() -> None:
        await _start(sandbox(view="system").arguments("true", cwd=workspace, network=False))

    async def host_view() -> None:
        await _start(sandbox().arguments("true", cwd=workspace, network=False))

    ours, baseline = await _median_pair(system_view, host_view, runs)
    rows.append(Row("sandbox start, system view", "host view", baseline, ours, "s", "bench trials"))

    def compute_view(private_search: bool) -> Timed:
        async def timed() -> None:
            if private_search:
                views.view(workspace, masked)
            else:
                saved, views.PRIVATE_ENTRIES = views.PRIVATE_ENTRIES, views.PrivateEntries(())
                try:
                    views.view(workspace, masked)
                finally:
                    views.PRIVATE_ENTRIES = saved

        return timed

    ours, baseline = await _median_pair(compute_view(True), compute_view(False), runs)
    rows.append(
        Row(
            "view computed per command",
            "without the private files' search",
            baseline,
            ours,
            "s",
            "a refresh: one stat per system folder",
        )
    )
    return rows


async def network_rows(root: Path, runs: int) -> list[Row]:
    workspace = root / "workspace"
    workspace.mkdir(exist_ok=True)

    def script(network: bool) -> Timed:
        async def timed() -> None:
            done = await run_script(
                "true",
                workspace=workspace,
                mounts=[],
                data_dir=root / "data",
                hidden=[],
                timeout=60,
                network=network,
            )
            if done.exit_code != 0:
                raise RuntimeError(f"the sandbox failed: {done.output[-300:]}")

        return timed

    ours, baseline = await _median_pair(script(True), script(False), runs)
    return [
        Row(
            "script start, isolated network",
            "no network",
            baseline,
            ours,
            "s",
            "slirp4netns started and configured before the script runs",
        )
    ]


TASK_FILES = {
    "instruction.md": "Fix add.\n",
    "task.toml": '[verifier]\nprotected_paths = ["**/conftest.py", "pytest.ini"]\n',
    "environment/app/calc.py": "def add(a, b):\n    return a + b\n",
    "environment/app/conftest.py": "",
    "tests/test_calc.py": "import sys\nsys.path.append('/app')\nfrom calc import add\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n",
    "tests/test.sh": "cd /app && python3 -P -m pytest -q -p no:cacheprovider /tests\n",
}


async def grading_rows(root: Path, runs: int) -> list[Row]:
    task_dir = root / "task"
    for name, text in TASK_FILES.items():
        (task_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (task_dir / name).write_text(text)
    task = load_task(task_dir)
    dirs = TrialDirs(root / "trial")
    data = root / "data"
    await build_workspace(task, dirs, data_dir=data, hidden=[])

    async def graded() -> None:
        await changed_lines(dirs, data_dir=data, hidden=[])
        verdict = await verify(task, dirs, data_dir=data, hidden=[])
        if verdict.reward != 1.0:
            raise RuntimeError(f"the benchmark's task failed: {verdict.problem}")

    async def tests_alone() -> None:
        done = await run_script(
            "bash /tests/test.sh",
            workspace=dirs.workspace,
            mounts=[
                Mount(task.tests_dir, Path("/tests")),
                Mount(dirs.workspace, Path("/app"), writable=True),
            ],
            data_dir=data,
            hidden=[],
            timeout=120,
        )
        if done.exit_code != 0:
            raise RuntimeError(f"the benchmark's tests failed: {done.output[-300:]}")

    ours, baseline = await _median_pair(graded, tests_alone, runs)
    return [
        Row(
            "grading one trial",
            "its tests alone",
            baseline,
            ours,
            "s",
            "diff and restore in sandboxes, tests under the exit guard",
        )
    ]


async def run_guard_bench(runs: int) -> list[Row]:
    """Every group's rows; a group that fails here is one row saying why, not a crash."""
    with tempfile.TemporaryDirectory(prefix="opencomposer-bench-guards-", dir="/var/tmp") as folder:
        root = Path(folder)
        groups: list[tuple[str, Awaitable[list[Row]]]] = [
            ("sandbox start", sandbox_rows(root, runs)),
            ("script start, isolated network", network_rows(root, max(3, runs // 5))),
            ("grading one trial", grading_rows(root, max(3, runs // 10))),
        ]
        rows: list[Row] = []
        for name, group in groups:
            try:
                rows += await group
            except (RuntimeError, OSError, TrainingError) as exc:
                rows.append(Row(name, "", None, None, "s", f"failed here: {exc}"))
    return rows
