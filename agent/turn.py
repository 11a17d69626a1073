"""One turn: model steps and tool calls until the model answers or a budget ends it.

`run` -> `step` (query the model, streaming its output as items) -> `act` (run the calls it
made, concurrently where they only read) -> repeat. Before each step the context is measured
and, past the trigger, the model summarizes itself (`summarizer`). Every way out is recorded
on the turn: answered, a budget (steps, tokens, wall time), repetition, interruption (open
items end `interrupted`, a running command is killed, the model stream is closed), or an
error the turn cannot recover from.
"""

import asyncio
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from opencomposer.agent.protocol.common import ApprovalMode, ErrorInfo
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    ApprovalDecision,
    Item,
    ItemStatus,
    OutputDelta,
    ReasoningItem,
    TextDelta,
)
from opencomposer.agent.protocol.threads import StopReason, Turn, TurnStatus
from opencomposer.agent.repetition import WARNING, Repetition, RepetitionGuard
from opencomposer.agent.summarizer import Summarizer
from opencomposer.agent.tool_items import ToolCallPlan, completion, groups, plan_calls
from opencomposer.agent.tools.errors import Denied
from opencomposer.serving.engines.base import (
    ChatMessage,
    Finished,
    GenerationRequest,
    GenerationResult,
    ReasoningDelta,
    SamplingParams,
)
from opencomposer.serving.engines.base import TextDelta as EngineText
from opencomposer.serving.engines.errors import ContextLengthExceeded, EngineError

if TYPE_CHECKING:
    from opencomposer.agent.session import ThreadSession

log = logging.getLogger(__name__)

# Retries of a model step after a transient engine failure (the engine itself already retries
# failures that happen before any output).
STEP_RETRIES = 2
RETRY_BACKOFF = 1.0
# Fewest tokens a step may be allowed to generate; with less room left, summarize first.
MIN_STEP_TOKENS = 64
_INTERRUPTED = "\n[interrupted: the user stopped the turn]"


class TurnStopped(Exception):
    """Ends the turn from inside the loop, with the reason recorded on it."""

    def __init__(
        self,
        reason: StopReason,
        status: TurnStatus = TurnStatus.completed,
        error: ErrorInfo | None = None,
    ) -> None:
        super().__init__(reason.value)
        self.reason, self.status, self.error = reason, status, error


@dataclass
class _Budget:
    started: float
    agent_steps: int = 0
    tokens: int = 0


class TurnRunner:
    def __init__(self, session: "ThreadSession", turn: Turn) -> None:
        self.session = session
        self.turn = turn
        self.settings = session.settings.agent
        self.summarizer = Summarizer(self)
        self.repetition = RepetitionGuard(self.settings.repetition_limit)
        self.budget = _Budget(started=time.monotonic())
        self.step_number = 0
        self.cancel_reason = StopReason.interrupted
        """Why the task was cancelled: a client interrupt, or the wall-time budget."""

        self.started = False

    # ------------------------------------------------------------------ the loop

    async def run(self) -> Turn:
        self.started = True
        try:
            await self.session.ensure_context_window()
            while True:
                self._check_budget()
                self.session.take_steer(self.turn.id)
                await self.summarizer.maybe_summarize()
                result = await self.step()
                if result.tool_calls:
                    await self.act(result)
                elif not self.session.has_steer(self.turn.id):
                    raise TurnStopped(StopReason.answered)
        except TurnStopped as stop:
            self.session.close_open_items(ItemStatus.interrupted)
            return self._finish(stop.status, stop.reason, stop.error)
        except asyncio.CancelledError:
            self.session.close_open_items(ItemStatus.interrupted, note=_INTERRUPTED)
            if self.cancel_reason == StopReason.interrupted:
                return self._finish(TurnStatus.interrupted, StopReason.interrupted)
            return self._finish(TurnStatus.completed, self.cancel_reason)
        except EngineError as exc:
            return self.fail(ErrorInfo(kind=exc.kind, message=exc.message, retryable=exc.retryable))
        except Exception as exc:  # a runtime bug must end the turn cleanly, not hang it
            log.exception("turn %s failed", self.turn.id)
            return self.fail(
                ErrorInfo(kind="internal_error", message=f"the agent runtime failed: {exc}")
            )

    def _check_budget(self) -> None:
        settings, budget = self.settings, self.budget
        if budget.agent_steps >= settings.max_steps:
            raise TurnStopped(StopReason.max_steps)
        if settings.max_turn_tokens is not None and budget.tokens >= settings.max_turn_tokens:
            raise TurnStopped(StopReason.max_tokens)
        if (
            settings.max_wall_time is not None
            and time.monotonic() - budget.started >= settings.max_wall_time
        ):
            raise TurnStopped(StopReason.max_wall_time)

    def fail(self, error: ErrorInfo) -> Turn:
        self.session.close_open_items(ItemStatus.failed)
        self.session.note_error(self.turn.id, error)
        return self._finish(TurnStatus.failed, StopReason.error, error)

    def _finish(
        self, status: TurnStatus, reason: StopReason, error: ErrorInfo | None = None
    ) -> Turn:
        self.turn = self.turn.model_copy(
            update={
                "status": status,
                "stop_reason": reason,
                "error": error,
                "completed_at": datetime.now(UTC),
            }
        )
        self.session.finish_turn(self.turn)
        return self.turn

    # ------------------------------------------------------------------ model steps

    def next_step(self) -> int:
        self.step_number += 1
        return self.step_number

    async def step(self) -> GenerationResult:
        """One model call with its output streamed as items; retried on transient failure,
        summarized and retried once when the context overflowed anyway."""
        overflowed = False
        for attempt in range(STEP_RETRIES + 1):
            try:
                return await self._step_once()
            except ContextLengthExceeded:
                if overflowed:
                    raise
                overflowed = True
                await self.summarizer.maybe_summarize(force=True)
            except EngineError as exc:
                if not exc.retryable or attempt == STEP_RETRIES:
                    raise
                self.session.note_error(
                    self.turn.id,
                    ErrorInfo(kind=exc.kind, message=f"{exc.message}; retrying", retryable=True),
                )
                await asyncio.sleep(RETRY_BACKOFF * (attempt + 1))
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _step_once(self) -> GenerationResult:
        session = self.session
        messages = session.prompt()
        room = session.context_window - session.meter.estimate(messages, session.tool_specs)
        if room < MIN_STEP_TOKENS:
            raise ContextLengthExceeded(f"only {room} tokens of context left for the answer")
        sampling = SamplingParams(
            max_tokens=min(self.settings.max_step_tokens, room),
            temperature=self.settings.temperature,
        )
        step = self.next_step()
        self.budget.agent_steps += 1
        result = await self.generate(messages, sampling, step, purpose="agent")
        return result

    async def generate(
        self,
        messages: list[ChatMessage],
        sampling: SamplingParams,
        step: int,
        *,
        purpose: str,
        tool_choice: str = "auto",
        text_item: Item | None = None,
    ) -> GenerationResult:
        """Stream one engine call into reasoning and text items and record it. `text_item`
        receives the text (a summary item); by default an agent_message item is made."""
        session = self.session
        request = GenerationRequest(
            messages=messages,
            tools=session.tool_specs,
            tool_choice=tool_choice,
            sampling=sampling,
            capture=session.capture,
            model=session.thread.model,
        )
        reasoning: ReasoningItem | None = None
        text = text_item
        started, clock = datetime.now(UTC), time.perf_counter()
        result: GenerationResult | None = None
        try:
            async with aclosing(session.engine.generate(request)) as stream:
                async for event in stream:
                    if isinstance(event, ReasoningDelta) and event.text:
                        if reasoning is None:
                            reasoning = session.add_item(
                                ReasoningItem(
                                    id=session.new_item_id(), turn_id=self.turn.id, step=step
                                )
                            )
                        session.delta(reasoning, TextDelta(text=event.text))
                    elif isinstance(event, EngineText) and event.text:
                        if text is None:
                            text = session.add_item(
                                AgentMessageItem(
                                    id=session.new_item_id(), turn_id=self.turn.id, step=step
                                )
                            )
                        session.delta(text, TextDelta(text=event.text))
                    elif isinstance(event, Finished):
                        result = event.result
        except EngineError as exc:
            session.record_call(self.turn.id, step, purpose, request, started, clock, error=exc)
            session.close_open_items(
                ItemStatus.failed,
                only=[i.id for i in (reasoning, text) if i is not None and i is not text_item],
            )
            raise
        if result is None:
            raise EngineError("the engine's stream ended without a result")
        session.record_call(self.turn.id, step, purpose, request, started, clock, result=result)
        self._account(result)
        session.meter.observe(messages, session.tool_specs, result.usage)
        if reasoning is not None or result.reasoning:
            if reasoning is None:
                reasoning = session.add_item(
                    ReasoningItem(id=session.new_item_id(), turn_id=self.turn.id, step=step)
                )
            session.complete_item(reasoning, text=result.reasoning)
        if text_item is None and (text is not None or result.text):
            if text is None:
                text = session.add_item(
                    AgentMessageItem(id=session.new_item_id(), turn_id=self.turn.id, step=step)
                )
            session.complete_item(text, text=result.text)
        return result

    def _account(self, result: GenerationResult) -> None:
        usage = result.usage
        if usage is None:
            return
        total = self.turn.usage.model_copy(
            update={
                "prompt_tokens": self.turn.usage.prompt_tokens + usage.prompt_tokens,
                "completion_tokens": self.turn.usage.completion_tokens + usage.completion_tokens,
                "cached_prompt_tokens": self.turn.usage.cached_prompt_tokens + usage.cached_tokens,
                "model_calls": self.turn.usage.model_calls + 1,
            }
        )
        self.turn = self.turn.model_copy(update={"usage": total})
        self.budget.tokens += usage.prompt_tokens - usage.cached_tokens + usage.completion_tokens

    # ------------------------------------------------------------------ tool calls

    async def act(self, result: GenerationResult) -> None:
        """Run the step's calls in order, consecutive read-only calls together. Items complete
        in call order, so the repetition guard sees the same sequence every run."""
        session = self.session
        plans = plan_calls(session, self.turn.id, self.step_number, result.tool_calls)
        for plan in plans:
            session.add_item(plan.item)
        stop = None
        for group in groups(plans):
            if len(group) == 1:
                await self._execute(group[0])
            else:
                await asyncio.gather(*(self._execute(plan) for plan in group))
            for plan in group:
                stop = self._complete(plan) or stop
            if stop is not None:
                raise stop

    async def _execute(self, plan: ToolCallPlan) -> None:
        """Run one call (after approval, when asked); sets its outcome."""
        session, prepared = self.session, plan.prepared
        if prepared is None or plan.verdict is None:
            plan.outcome = plan.failure
            return
        if plan.verdict.mode == ApprovalMode.deny:
            self._decline(
                plan,
                Denied(
                    f"the approval policy refuses this call ({plan.verdict.reason})",
                    hint="Do the task another way, or ask the user to change the policy.",
                ),
            )
            return
        if plan.verdict.mode == ApprovalMode.ask:
            answer = await session.ask_approval(plan.item, prepared, plan.verdict.reason)
            if answer.decision in (ApprovalDecision.deny, ApprovalDecision.abort):
                note = f": {answer.message}" if answer.message else ""
                self._decline(
                    plan,
                    Denied(
                        f"the call was not approved{note}",
                        hint="Do not retry it as it is; change approach or ask the user.",
                    ),
                )
                if answer.decision == ApprovalDecision.abort:
                    self._complete(plan)
                    raise TurnStopped(StopReason.interrupted, TurnStatus.interrupted)
                return
            if answer.decision == ApprovalDecision.approve_for_thread:
                session.gate.grant(prepared)

        def stream_output(stream: str, text: str) -> None:
            session.delta(plan.item, OutputDelta(stream=stream, text=text))  # type: ignore[arg-type]

        plan.outcome = await session.harness.run(
            prepared, call_id=plan.call.id, turn_id=self.turn.id, on_output=stream_output
        )

    def _decline(self, plan: ToolCallPlan, denial: Denied) -> None:
        plan.outcome = self.session.harness.failure(
            plan.call.id, plan.call.name, denial, plan.prepared
        )
        plan.declined = True

    def _complete(self, plan: ToolCallPlan) -> TurnStopped | None:
        """Complete the call's item; a stop when the same failure keeps repeating."""
        outcome = plan.outcome
        if outcome is None or self.session.item(plan.item.id).status != ItemStatus.in_progress:
            return None
        verdict = Repetition.fine
        if not plan.declined:
            error = outcome.error.message if outcome.error else None
            verdict = self.repetition.observe(
                plan.call.name, plan.call.arguments, outcome.ok, error
            )
        if verdict == Repetition.warn:
            outcome.text += WARNING.format(count=self.repetition.count)
        self.session.complete_item(
            plan.item, **completion(plan.item, outcome, declined=plan.declined)
        )
        return TurnStopped(StopReason.repetition) if verdict == Repetition.stop else None
