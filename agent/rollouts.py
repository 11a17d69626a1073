"""Many threads at once in one process: how training runs the agent for RL rollouts.

Each rollout is a thread of its own: its workspace, its harness (sandbox, jobs, checkpoints),
its redactor (only its workspace's secrets mask its text), its limits and tool set, fixed at
`thread/start` exactly as a client would set them. The runtime, its engine and its trace store
are shared, as rollouts share a policy server. One rollout failing (its workspace gone, its
engine call refused) is that rollout's result, never the others'; a rollout that is done is
closed, so a long run does not keep thousands of harnesses alive.
"""

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opencomposer.agent.protocol.common import ApprovalPolicy
from opencomposer.agent.protocol.items import Item, TextInput, UserInput
from opencomposer.agent.protocol.threads import Turn, TurnLimits
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import SessionError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RolloutSpec:
    workspace: Path
    prompt: str | Sequence[UserInput]
    limits: TurnLimits | None = None
    """Tighter than the server's (steps, tokens, wall time); unset is the server's."""

    tools: Sequence[str] | None = None
    """The tools offered, by name (the environment's); None is every tool."""

    approval_policy: ApprovalPolicy | None = None
    """Tighter than the server's only. Nobody answers a rollout's approval requests, so
    a call that needs one is denied (the model is told so)."""

    model: str | None = None
    title: str | None = None


@dataclass
class RolloutResult:
    spec: RolloutSpec
    thread_id: str | None = None
    turn: Turn | None = None
    """The turn as it ended (status, stop reason, usage); None when it could not start."""

    items: list[Item] = field(default_factory=list)
    """The thread's items, as stored (secrets masked): what training exports."""

    error: str | None = None
    """Why the rollout could not run (a bad workspace, an unknown tool, a failed store)."""


async def run_rollouts(
    runtime: AgentRuntime, specs: Sequence[RolloutSpec], *, concurrency: int | None = None
) -> list[RolloutResult]:
    """Run every spec's one turn, at most `concurrency` at once (all by default); results in
    the order of `specs`."""
    gate = asyncio.Semaphore(concurrency or max(len(specs), 1))

    async def one(spec: RolloutSpec) -> RolloutResult:
        async with gate:
            return await run_rollout(runtime, spec)

    return list(await asyncio.gather(*(one(spec) for spec in specs)))


async def run_rollout(runtime: AgentRuntime, spec: RolloutSpec) -> RolloutResult:
    result = RolloutResult(spec)
    prompt: list[UserInput] = (
        [TextInput(text=spec.prompt)] if isinstance(spec.prompt, str) else list(spec.prompt)
    )
    try:
        session = await runtime.start_thread(
            spec.workspace,
            title=spec.title,
            model=spec.model,
            approval_policy=spec.approval_policy,
            limits=spec.limits,
            tools=spec.tools,
        )
    except (SessionError, OSError) as exc:
        result.error = getattr(exc, "message", None) or str(exc)
        return result
    result.thread_id = session.thread.id
    try:
        result.turn = await session.run_turn(prompt)
        result.items = list(session.items)
    except SessionError as exc:
        result.error = exc.message
    except Exception as exc:  # a fault in one rollout must not end the run of the others
        log.exception("rollout %s failed", session.thread.id)
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        await runtime.close_thread(session.thread.id)
    return result
