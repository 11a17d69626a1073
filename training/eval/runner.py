"""Runs trials: a task's starting repository, then the agent (the real runtime and tool
harness, the very seams RL rollouts use) or the task's oracle, then the verifier; each trial's
result saved as it ends, so an interrupted run resumes where it stopped.

Agent trials share one runtime (its engine and trace store), as rollouts share a policy
server; each has its own workspace, sandbox and budget (the task's agent timeout, and the
steps and tokens the run allows). The agent's sandbox hides every task folder (their tests and
solutions) and the whole run folder but its own workspace; approvals nobody could answer are
not asked (the sandbox is the boundary), and the network is off unless the task needs it. The
verifier's reward is recorded with the trace in the trace store (`verifier_reward`), which is
what turns a bench run into RL data.

`--oracle` validates tasks: the oracle's solution must pass and the untouched starting
repository must fail.
"""

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.protocol.common import ApprovalMode
from opencomposer.agent.protocol.items import ToolCallFields
from opencomposer.agent.protocol.threads import TurnLimits
from opencomposer.agent.rollouts import RolloutSpec, run_rollout
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.tools.sandbox import Mount
from opencomposer.agent.traces.base import Outcome
from opencomposer.config import Settings
from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.results import (
    Mode,
    RunInfo,
    TrialKind,
    TrialResult,
    load_result,
    save_result,
    save_run,
)
from opencomposer.training.eval.sandboxed import require_bubblewrap, run_script
from opencomposer.training.eval.task import Task
from opencomposer.training.eval.verifier import Verdict, verify
from opencomposer.training.eval.workspace import TrialDirs, build_workspace, changed_lines

OnResult = Callable[[TrialResult], None]
Execute = Callable[["Trial"], Awaitable[TrialResult]]


@dataclass(frozen=True)
class Budget:
    """What one agent trial may spend besides the task's own timeout."""

    max_steps: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Trial:
    task: Task
    kind: TrialKind
    attempt: int

    @property
    def name(self) -> str:
        return self.kind if self.kind != "agent" else f"attempt-{self.attempt}"


def plan(tasks: Sequence[Task], mode: Mode, attempts: int) -> list[Trial]:
    if mode == "oracle":
        kinds: list[TrialKind] = ["oracle", "untouched"]
        return [Trial(task, kind, 0) for task in tasks for kind in kinds]
    return [Trial(task, "agent", n) for task in tasks for n in range(attempts)]


def bench_settings(settings: Settings, hidden: Sequence[Path]) -> Settings:
    """The runtime's settings for bench trials: commands see the system's view of the host
    (an allow-list: nothing of the host's data, the task folders and the checkout they may
    live in included) and the bench's folders are hidden besides, every call that stays in
    the sandbox is allowed without asking, the network is refused."""
    copy = settings.model_copy(deep=True)
    copy.tools.sandbox.hide = [*copy.tools.sandbox.hide, *hidden]
    copy.tools.sandbox.view = "system"
    copy.tools.sandbox.network = "isolated"
    approval = copy.agent.approval
    approval.read_only = approval.writes_workspace = approval.dangerous = ApprovalMode.auto
    approval.network = ApprovalMode.deny
    copy.tools.allow_network = False
    return copy


class BenchRunner:
    def __init__(
        self,
        run_dir: Path,
        tasks: Sequence[Task],
        *,
        data_dir: Path,
        runtime: AgentRuntime | None = None,
        budget: Budget | None = None,
        concurrency: int | None = None,
    ) -> None:
        """`runtime` runs the agent trials (built with `bench_settings`); oracle runs need
        none. `data_dir`: opencomposer's data folder, masked in every sandbox."""
        self.run_dir = run_dir.resolve()
        self.tasks = list(tasks)
        self.data_dir = data_dir
        self.runtime = runtime
        self.budget = budget or Budget()
        self.concurrency = concurrency or max(1, os.cpu_count() or 1)
        self.hidden = hidden_paths(self.run_dir, self.tasks)
        self.reused = 0

    async def run(
        self,
        info: RunInfo,
        *,
        on_result: OnResult | None = None,
        restart: bool = False,
        execute: Execute | None = None,
    ) -> list[TrialResult]:
        """Every planned trial's result, in the plan's order. A result already in the run
        folder is reused unless `restart` or its task has changed since (`reused` counts
        them). `execute` runs one trial elsewhere (a Ray worker); by default, `self.trial`."""
        require_bubblewrap()
        if info.mode == "agent" and self.runtime is None and execute is None:
            raise TrainingError("agent trials need an agent runtime")
        execute = execute or self.trial
        save_run(self.run_dir, info)
        gate = asyncio.Semaphore(self.concurrency)
        trials = plan(self.tasks, info.mode, info.attempts)
        digests = {task.name: task_digest(task) for task in self.tasks}
        self.reused = 0

        async def one(trial: Trial) -> TrialResult:
            dirs = TrialDirs(self.run_dir / trial.task.name / trial.name)
            digest = digests[trial.task.name]
            done = None if restart else load_result(dirs.root)
            if done is not None and done.task_digest == digest:
                self.reused += 1
            else:
                async with gate:
                    done = await execute(trial)
                done.task_digest = digest
                save_result(dirs.root, done)
            if on_result is not None:
                on_result(done)
            return done

        return list(await asyncio.gather(*(one(trial) for trial in trials)))

    async def trial(self, trial: Trial) -> TrialResult:
        """One trial, start to grade, in its folder of the run (whatever was there is
        replaced)."""
        return await self._trial(trial, TrialDirs(self.run_dir / trial.task.name / trial.name))

    async def _trial(self, trial: Trial, dirs: TrialDirs) -> TrialResult:
        task = trial.task
        result = unfinished(trial)
        started = time.monotonic()
        try:
            await build_workspace(task, dirs, data_dir=self.data_dir, hidden=self.hidden)
        except (TrainingError, OSError) as exc:
            result.error = f"environment: {exc}"
            return result
        result.setup_seconds = time.monotonic() - started
        started = time.monotonic()
        if trial.kind == "agent":
            await self._agent(task, dirs, result)
        elif trial.kind == "oracle":
            await self._oracle(task, dirs, result)
        result.agent_seconds = time.monotonic() - started
        if result.error is not None:
            return result
        try:
            result.lines_changed, result.files_changed = await changed_lines(
                dirs, data_dir=self.data_dir, hidden=self.hidden
            )
            verdict = await verify(task, dirs, data_dir=self.data_dir, hidden=self.hidden)
        except (TrainingError, OSError) as exc:
            result.error = f"verifier: {exc}"
            return result
        _take_verdict(result, verdict)
        self._record_reward(result, dirs)
        return result

    async def _agent(self, task: Task, dirs: TrialDirs, result: TrialResult) -> None:
        assert self.runtime is not None
        limits = TurnLimits(
            max_wall_time=task.config.agent.timeout_sec,
            max_steps=self.budget.max_steps,
            max_tokens=self.budget.max_tokens,
        )
        spec = RolloutSpec(dirs.workspace, task.instruction, limits, title=f"bench {task.name}")
        rollout = await run_rollout(self.runtime, spec)
        result.thread_id = rollout.thread_id
        if rollout.turn is not None:
            result.turn_status = rollout.turn.status.value
            result.stop_reason = rollout.turn.stop_reason and rollout.turn.stop_reason.value
            result.prompt_tokens = rollout.turn.usage.prompt_tokens
            result.completion_tokens = rollout.turn.usage.completion_tokens
        result.tool_calls = sum(isinstance(item, ToolCallFields) for item in rollout.items)
        if rollout.thread_id is not None:
            result.steps = len(self.runtime.store.model_calls(rollout.thread_id))
        if rollout.error is not None:
            result.error = f"agent: {rollout.error}"

    async def _oracle(self, task: Task, dirs: TrialDirs, result: TrialResult) -> None:
        if not task.has_solution:
            result.error = "oracle: the task has no solution/solve.sh"
            return
        run = await run_script(
            "bash /solution/solve.sh",
            workspace=dirs.workspace,
            mounts=[
                Mount(task.solution_dir, Path("/solution")),
                Mount(dirs.workspace, Path(task.workdir), writable=True),
            ],
            data_dir=self.data_dir,
            hidden=self.hidden,
            timeout=task.config.agent.timeout_sec,
            env={**task.env, **task.config.solution.env},
            network=task.config.environment.allow_internet,
            memory_mb=task.config.environment.memory_mb,
        )
        (dirs.private / "solve-output.log").write_text(run.output, encoding="utf-8")
        if run.exit_code != 0:
            why = "timed out" if run.timed_out else f"exited with {run.exit_code}"
            result.error = f"oracle: solution/solve.sh {why}: {run.output[-500:].strip()}"

    def _record_reward(self, result: TrialResult, dirs: TrialDirs) -> None:
        if self.runtime is None or result.thread_id is None:
            return
        detail = {
            "reward": result.reward,
            "task": result.task,
            "category": result.category,
            "run": str(self.run_dir),
            "trial": dirs.root.name,
            "source": result.reward_source,
            "problem": result.problem,
        }
        self.runtime.store.record_outcome(Outcome(result.thread_id, "verifier_reward", detail))


def unfinished(trial: Trial) -> TrialResult:
    """A trial's result before it has earned anything: reward 0 until the verifier says."""
    task = trial.task
    return TrialResult(
        task=task.name,
        category=task.category,
        difficulty=task.config.metadata.difficulty,
        kind=trial.kind,
        attempt=trial.attempt,
        reward=0.0,
        passed=False,
        reward_source="none",
    )


def task_digest(task: Task) -> str:
    """Every file of the task folder, names and bytes: a result graded against other tests,
    another solution or another starting repository is not this task's."""
    digest = hashlib.sha256()
    for path in sorted(p for p in task.root.rglob("*") if p.is_file() or p.is_symlink()):
        digest.update(path.relative_to(task.root).as_posix().encode() + b"\0")
        content = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()


def hidden_paths(run_dir: Path, tasks: Sequence[Task]) -> list[Path]:
    """What no trial's commands may see: the run folder (each trial's own workspace stays
    visible: the sandbox binds it over the mask) and every task folder."""
    return [run_dir, *dict.fromkeys(task.root for task in tasks)]


def _take_verdict(result: TrialResult, verdict: Verdict) -> None:
    result.reward = verdict.reward
    result.passed = verdict.passed
    result.reward_source = verdict.source
    result.problem = verdict.problem
    result.restored = verdict.restored
    result.detail = verdict.detail
    result.verifier_seconds = verdict.seconds
