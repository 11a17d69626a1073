"""Bench trials across a Ray cluster: a pool of trial workers, each a Ray actor holding its
own agent runtime (engine, trace store, sandboxes), running one trial at a time with the very
code a local run uses (`BenchRunner.trial`). The driver plans, resumes, saves results and
reports as it does locally; only where a trial runs changes. RL rollouts are the same shape:
a worker per slot, a policy behind each worker's engine, the reward beside the trace.

Every node needs this package, bubblewrap, and the run folder and task folders at the same
paths (one machine: nothing to arrange; several: shared storage). Secrets never travel in an
actor's arguments (Ray keeps those in its control store, for anyone on the cluster to read):
each worker takes the engine's API key from its own node, its environment or its user's config
file; a local cluster's processes inherit this process's. `ray_cluster` says how the cluster
itself is kept closed.
"""

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from opencomposer.config import ENV_PREFIX, Settings, load_settings
from opencomposer.training.eval.ray_cluster import LOCAL, connected
from opencomposer.training.eval.results import Mode, RunInfo, TrialResult
from opencomposer.training.eval.runner import BenchRunner, Budget, OnResult, Trial, unfinished


class TrialWorker:
    """One worker slot: built once (an engine loads its model once), then trial after trial."""

    def __init__(
        self,
        settings_json: str,
        run_dir: str,
        task_roots: list[str],
        mode: Mode,
        budget: tuple[int | None, int | None],
    ) -> None:
        # Imported here: the actor is built in a Ray worker process.
        from opencomposer.agent.runtime import AgentRuntime
        from opencomposer.serving.engines import make_engine
        from opencomposer.training.eval.runner import bench_settings, hidden_paths
        from opencomposer.training.eval.task import load_task

        settings = with_node_secrets(Settings.model_validate_json(settings_json))
        tasks = [load_task(Path(root)) for root in task_roots]
        self.tasks = {task.name: task for task in tasks}
        self.engine = None
        runtime = None
        if mode == "agent":
            settings = bench_settings(settings, hidden_paths(Path(run_dir), tasks))
            self.engine = make_engine(settings.engine, settings.models_dir)
            runtime = AgentRuntime(settings, self.engine)
        self.runner = BenchRunner(
            Path(run_dir), tasks, data_dir=settings.home, runtime=runtime, budget=Budget(*budget)
        )

    async def run_trial(self, task: str, kind: str, attempt: int) -> str:
        trial = Trial(self.tasks[task], kind, attempt)  # type: ignore[arg-type]
        return (await self.runner.trial(trial)).model_dump_json()

    async def close(self) -> None:
        if self.runner.runtime is not None:
            await self.runner.runtime.close()
        if self.engine is not None:
            await self.engine.aclose()


async def run_on_ray(
    address: str,
    runner: BenchRunner,
    info: RunInfo,
    settings: Settings,
    *,
    workers: int,
    on_result: OnResult | None = None,
    restart: bool = False,
) -> list[TrialResult]:
    """The run with its trials on `workers` Ray actors of one CPU each. `address`: "local"
    starts a Ray instance for this run (`ray_cluster`); anything else is `ray.init`'s (auto,
    host:port, ray://host:port)."""
    node = secret_environment(settings) if address == LOCAL else {}
    with connected(address, workers, node) as ray:
        return await _run_actors(ray, runner, info, settings, workers, on_result, restart)


async def _run_actors(
    ray: Any,
    runner: BenchRunner,
    info: RunInfo,
    settings: Settings,
    workers: int,
    on_result: OnResult | None,
    restart: bool,
) -> list[TrialResult]:
    actor = ray.remote(TrialWorker).options(num_cpus=1, max_concurrency=1)
    arguments = (
        public_settings(settings),
        str(runner.run_dir),
        [str(task.root) for task in runner.tasks],
        info.mode,
        (runner.budget.max_steps, runner.budget.max_tokens),
    )
    pool = [actor.remote(*arguments) for _ in range(workers)]
    idle: asyncio.Queue[Any] = asyncio.Queue()
    for worker in pool:
        idle.put_nowait(worker)

    async def execute(trial: Trial) -> TrialResult:
        worker = await idle.get()
        try:
            done = await worker.run_trial.remote(trial.task.name, trial.kind, trial.attempt)
            return TrialResult.model_validate_json(done)
        except ray.exceptions.RayError as exc:
            failed = unfinished(trial)
            failed.error = f"ray worker: {_first_line(exc)}"
            return failed
        finally:
            idle.put_nowait(worker)

    runner.concurrency = workers
    try:
        return await runner.run(info, on_result=on_result, restart=restart, execute=execute)
    finally:
        await _close(ray, pool)


def public_settings(settings: Settings) -> str:
    """The settings as JSON with every secret left out (not masked: a worker must not take
    pydantic's `**********` for a key)."""
    return _without_secrets(settings).model_dump_json()


def _without_secrets(model: BaseModel) -> BaseModel:
    changes: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            changes[name] = None
        elif isinstance(value, BaseModel):
            changes[name] = _without_secrets(value)
    return model.model_copy(update=changes)


def _secrets(model: BaseModel, prefix: str = "") -> dict[str, SecretStr]:
    """Every secret set in `model`, by dotted key."""
    found: dict[str, SecretStr] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            found[prefix + name] = value
        elif isinstance(value, BaseModel):
            found |= _secrets(value, f"{prefix}{name}.")
    return found


def secret_environment(settings: Settings) -> dict[str, str]:
    """The secrets of `settings` as the variables opencomposer reads them from, for the
    processes of a local cluster to inherit (a key given with -c exists nowhere else)."""
    return {
        ENV_PREFIX + key.replace(".", "__").upper(): value.get_secret_value()
        for key, value in _secrets(settings).items()
    }


def with_node_secrets(settings: Settings) -> Settings:
    """`settings` with the secrets this node has (its environment, its user's config file):
    what `public_settings` left out."""
    node = _secrets(load_settings().settings)
    copy = settings.model_copy(deep=True)
    for key, value in node.items():
        *parents, leaf = key.split(".")
        section: Any = copy
        for part in parents:
            section = getattr(section, part)
        setattr(section, leaf, value)
    return copy


async def _close(ray: Any, pool: Sequence[Any]) -> None:
    for worker in pool:
        with contextlib.suppress(ray.exceptions.RayError):  # a dead worker has nothing open
            await worker.close.remote()
        ray.kill(worker)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
