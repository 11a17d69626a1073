"""The verifier of one trial: after the agent is done and its processes are gone, the
protected paths are restored (in a sandbox, from the starting copies: `workspace`), a fresh
copy of the task's tests is shown at /tests (never in the workspace, never before), an empty
/logs/verifier takes the reward, and tests/test.sh runs in a sandbox of its own with the
workspace at /app, every pytest in it under the exit guard (`exit_guard`).

Which reward counts, in order: SWE-bench grading for a task that asks for it (from the runner's
own capture of the output and the exit status), else reward.json's "reward", else reward.txt,
else the exit status (0 is 1.0). Printed text ("PASSED", "reward: 1") never counts, and an exit
status other than 0 caps the reward at 0: what the code under test writes into the reward file
cannot outvote the tests that failed. A pytest session the code under test ended from inside
(it started and never finished) caps it at 0 too. Reward files are read only when they are
plain files (not links the code under test pointed somewhere, not FIFOs), and only their
first 64 KiB.
"""

import json
import math
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opencomposer.agent.tools.sandbox import Mount
from opencomposer.training.eval.exit_guard import Sessions, exit_guard
from opencomposer.training.eval.grading import grade_swebench
from opencomposer.training.eval.sandboxed import run_script
from opencomposer.training.eval.task import Task
from opencomposer.training.eval.workspace import TrialDirs, restore_protected

_REWARD_BYTES = 65536


@dataclass
class Verdict:
    reward: float
    source: str
    """swebench, reward.json, reward.txt, exit_status, or none (the reward is 0 by fault)."""

    exit_code: int | None
    seconds: float
    restored: list[str] = field(default_factory=list)
    """Protected paths the agent had changed or planted, put back before the tests ran."""

    problem: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.reward >= 1.0


async def verify(task: Task, dirs: TrialDirs, *, data_dir: Path, hidden: list[Path]) -> Verdict:
    restored = await restore_protected(task, dirs, data_dir=data_dir, hidden=hidden)
    verifier = dirs.private / "verifier"
    if verifier.exists():
        shutil.rmtree(verifier)
    tests, logs = verifier / "tests", verifier / "logs"
    shutil.copytree(task.tests_dir, tests, symlinks=True)
    logs.mkdir(parents=True)
    config = task.config
    async with exit_guard({**task.env, **config.verifier.env}) as guard:
        run = await run_script(
            "bash /tests/test.sh",
            workspace=dirs.workspace,
            mounts=[
                Mount(tests, Path("/tests")),
                Mount(logs, Path("/logs/verifier"), writable=True),
                Mount(dirs.workspace, Path(task.workdir), writable=True),
                guard.mount,
            ],
            data_dir=data_dir,
            hidden=hidden,
            timeout=config.verifier.timeout_sec,
            env={**task.env, **config.verifier.env, **guard.env},
            network=config.environment.allow_internet,
            memory_mb=config.environment.memory_mb,
            pass_fds=guard.pass_fds,
        )
    (verifier / "test-output.log").write_text(run.output, encoding="utf-8")
    verdict = _reward(task, run.exit_code, run.output, logs, guard.sessions)
    verdict.seconds, verdict.restored = run.seconds, restored
    return verdict


def _reward(
    task: Task, exit_code: int | None, output: str, logs: Path, sessions: Sessions
) -> Verdict:
    if exit_code is None:
        timeout = task.config.verifier.timeout_sec
        return Verdict(0.0, "none", None, 0.0, problem=f"the tests ran past {timeout:g} s")
    if sessions.not_loaded(output):
        return Verdict(
            0.0,
            "none",
            exit_code,
            0.0,
            problem="pytest could not load the verifier's exit guard: tests/test.sh replaces "
            "PYTHONPATH instead of adding to it (PYTHONPATH=...:$PYTHONPATH)",
        )
    verdict = _graded(task, exit_code, output, logs)
    if sessions.unfinished and verdict.reward > 0:
        pids = ", ".join(str(pid) for pid in sessions.unfinished)
        verdict.problem = (
            f"a pytest session (pid {pids}) started and never finished: the code under test "
            f"ended it from inside (os._exit, a signal or a crash), so its exit status says "
            f"nothing; {verdict.source} said {verdict.reward:g}"
        )
        verdict.reward = 0.0
    return verdict


def _graded(task: Task, exit_code: int, output: str, logs: Path) -> Verdict:
    if task.swebench is not None:
        grade = grade_swebench(task.swebench, output, exit_code)
        detail = {"status": grade.status, "report": grade.report}
        return Verdict(grade.reward, "swebench", exit_code, 0.0, [], grade.problem, detail)
    source, reward, problem, detail = _reward_file(logs)
    if reward is None:
        source, reward = "exit_status", 1.0 if exit_code == 0 else 0.0
    elif exit_code != 0 and reward > 0:
        problem = (
            f"tests/test.sh exited {exit_code} but {source} says {reward:g}: the exit status wins"
        )
        reward = 0.0
    return Verdict(reward, source, exit_code, 0.0, [], problem, detail)


def _reward_file(logs: Path) -> tuple[str, float | None, str | None, dict[str, Any]]:
    for name in ("reward.json", "reward.txt"):
        text = _read_plain(logs / name)
        if text is None:
            continue
        try:
            if name == "reward.json":
                data = json.loads(text)
                if not isinstance(data, dict) or "reward" not in data:
                    raise ValueError('no "reward" key')
                value, detail = float(data["reward"]), data
            else:
                value, detail = float(text.strip()), {}
        except (ValueError, TypeError) as exc:
            return name, 0.0, f"{name} holds no number: {exc}", {}
        if not math.isfinite(value):
            return name, 0.0, f"{name} holds {value}", {}
        return name, value, None, detail
    return "none", None, None, {}


def _read_plain(path: Path) -> str | None:
    """The file's text when it is a regular file, read without following a link; None when it
    is absent or anything else (a link, a fifo that would block the read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _REWARD_BYTES).decode("utf-8", errors="replace")
    finally:
        os.close(fd)
