"""One turn: model steps and tool calls until the model answers or a budget ends it.

`run` -> `step` (query the model, streaming its output as items) -> `act` (run the calls it
made, concurrently where they only read) -> repeat. Before each step the context is measured
and, past the trigger, the model summarizes itself (`summarizer`). Every way out is recorded
on the turn: answered, a budget (steps, tokens, wall time), repetition, interruption (open
items end `interrupted`, a running command is killed, the model stream is closed), or an
error the turn cannot recover from, among them a full data folder: the session aborts the
turn when its events can no longer be stored, and a tool that could not record its
checkpoint ends it too (`DataFolderFull`).
"""

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from opencomposer.agent.approvals import ApprovalGate
from opencomposer.agent.item_log import ItemLog
from opencomposer.agent.protocol.common import ApprovalMode, ErrorInfo
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    ApprovalDecision,
    Item,
    ItemStatus,
    OutputDelta,
    ReasoningItem,
    TextDelta,
    ToolCallFields,
    UserMessageItem,
)
from opencomposer.agent.protocol.methods import ApprovalRequestResponse
from opencomposer.agent.protocol.threads import StopReason, Turn, TurnLimits, TurnStatus
from opencomposer.agent.repetition import (
    WARNING,
    Repetition,
    RepetitionGuard,
    TextLoopDetector,
)
from opencomposer.agent.summarizer import summarize_if_due
from opencomposer.agent.tokens import CHARS_PER_TOKEN, ContextWindow, step_token_cap
from opencomposer.agent.tool_items import ToolCallPlan, completion, groups, plan_calls
from opencomposer.agent.tools.errors import Denied
from opencomposer.agent.tools.harness_protocol import Harness, HarnessUnavailable, PreparedCall
from opencomposer.config import AgentSettings
from opencomposer.data_folder import DataFolderFull
from opencomposer.serving.engines.base import (
    Capture,
    ChatMessage,
    Engine,
    Finished,
    GenerationRequest,
    GenerationResult,
    ReasoningDelta,
    SamplingParams,
    Usage,
)
from opencomposer.serving.engines.base import TextDelta as EngineText
from opencomposer.serving.engines.errors import ContextLengthExceeded, EngineError

logger = logging.getLogger(__name__)

# Retries of a model step after a transient engine failure (the engine itself already retries
# failures that happen before any output).
STEP_RETRIES = 2
RETRY_BACKOFF = 1.0
# Fewest tokens a step may be allowed to generate; with less room left, summarize first.
MIN_STEP_TOKENS = 64
_INTERRUPTED = "\n[interrupted: the user stopped the turn]"
_OUT_OF_TIME = "\n[interrupted: the turn ran out of wall time]"
_STOP_REASONS = {"length": StopReason.max_step_tokens, "repetition": StopReason.repeated_text}
"""How a final step that made no tool call ended the turn, by its finish reason."""
Number = TypeVar("Number", int, float)


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


@dataclass(frozen=True)
class TurnBudget:
    """What one turn may spend: model steps (summaries not counted), tokens (prompt tokens not
    served from the engine's cache, plus generated ones) and seconds; None is no limit."""

    steps: int
    tokens: int | None = None
    wall_time: float | None = None

    @classmethod
    def of(cls, settings: AgentSettings, *limits: TurnLimits | None) -> "TurnBudget":
        """The server's budget, tightened by each of `limits` (the thread's, the turn's)."""
        steps: list[int | None] = [settings.max_steps]
        tokens = [settings.max_turn_tokens]
        seconds = [settings.max_wall_time]
        for limit in limits:
            if limit is not None:
                steps.append(limit.max_steps)
                tokens.append(limit.max_tokens)
                seconds.append(limit.max_wall_time)
        return cls(min(s for s in steps if s is not None), _least(tokens), _least(seconds))


def _least(values: list[Number | None]) -> Number | None:
    """The smallest of the limits that are set (None: no limit at all)."""
    present = [value for value in values if value is not None]
    return min(present) if present else None


class ApprovalAsker(Protocol):
    """Asks the thread's clients whether a call may run (`ThreadSession.ask_approval`)."""

    def __call__(
        self, target: ToolCallFields, call: PreparedCall, reason: str
    ) -> Awaitable[ApprovalRequestResponse]: ...


class CallRecorder(Protocol):
    """Stores one model call in the trace's token layer (`ThreadSession.record_call`)."""

    def __call__(
        self,
        turn_id: str,
        step: int,
        purpose: str,
        request: GenerationRequest,
        started: datetime,
        clock: float,
        *,
        result: GenerationResult | None = None,
        error: EngineError | None = None,
    ) -> None: ...


class ActiveTurn:
    """A turn while it runs. It owns everything that lives only as long as the turn: its
    budget and what it has spent, the steer queue, the step counter and the repetition guard.
    The thread lends it the item log (the only way it changes anything), the engine, the tool
    harness, the approval gate and the context window, and learns how it ended from `run`."""

    def __init__(
        self,
        turn: Turn,
        *,
        log: ItemLog,
        engine: Engine,
        harness: Harness,
        gate: ApprovalGate,
        settings: AgentSettings,
        open_window: Callable[[], Awaitable[ContextWindow]],
        ask_approval: ApprovalAsker,
        record_call: CallRecorder,
        capture: Capture,
        model: str | None,
        budget: TurnBudget | None = None,
    ) -> None:
        self.turn = turn
        self.log = log
        self.engine = engine
        self.harness = harness
        self.gate = gate
        self.settings = settings
        self.budget = budget or TurnBudget.of(settings)
        self._open_window = open_window
        self._ask_approval = ask_approval
        self._record_call = record_call
        self.capture = capture
        self.model = model
        self.window = ContextWindow(0, 0)  # the real one is opened when the turn runs
        self.repetition = RepetitionGuard(settings.repetition_limit)
        self.steps_taken = 0
        self.tokens_spent = 0
        self.step_number = 0
        self._steer: list[UserMessageItem] = []
        self.started = False
        """Whether `run` has begun: a task cancelled before it runs cannot clean up."""

        self._aborted: ErrorInfo | None = None

    def abort(self, error: ErrorInfo) -> None:
        """End the turn failed with `error`: its owner cancels it (once it has started), and
        the cancellation ends it so instead of as interrupted."""
        self._aborted = error

    # ------------------------------------------------------------------ steering

    def steer(self, item: UserMessageItem) -> None:
        """Queue input for the model's next step."""
        self._steer.append(item)

    @property
    def has_steer(self) -> bool:
        return bool(self._steer)

    def take_steer(self) -> None:
        """Log the input added since the last step (called between steps, so the log order
        is the order the model sees)."""
        for item in self._steer:
            self.log.add(item, complete=True)
        self._steer.clear()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> Turn:
        """Run the turn to its end and return it as it ended. The wall-time budget is one
        deadline over the whole turn: it cancels whatever is in progress (a model stream, a
        command, a wait for approval), as an interrupt does."""
        self.started = True
        if self._aborted is not None:
            return self.fail(self._aborted)
        deadline = asyncio.timeout(self.budget.wall_time)
        try:
            async with deadline:
                await self._loop()
        except TurnStopped as stop:
            if stop.status == TurnStatus.failed and stop.error is not None:
                return self.fail(stop.error)
            self.log.close_open(ItemStatus.interrupted)
            return self._end(stop.status, stop.reason, stop.error)
        except asyncio.CancelledError:
            if self._aborted is not None:
                return self.fail(self._aborted)
            self.log.close_open(ItemStatus.interrupted, note=_INTERRUPTED)
            return self._end(TurnStatus.interrupted, StopReason.interrupted)
        except DataFolderFull as exc:
            return self.fail(ErrorInfo(kind=exc.kind, message=exc.message))
        except EngineError as exc:
            return self.fail(ErrorInfo(kind=exc.kind, message=exc.message, retryable=exc.retryable))
        except HarnessUnavailable as exc:
            return self.fail(exc.info())
        except TimeoutError as exc:
            if not deadline.expired():
                return self._runtime_failure(exc)
            self.log.close_open(ItemStatus.interrupted, note=_OUT_OF_TIME)
            return self._end(TurnStatus.completed, StopReason.max_wall_time)
        except Exception as exc:
            return self._runtime_failure(exc)
        raise AssertionError("unreachable")  # the loop only ends by raising

    async def _loop(self) -> None:
        self.window = await self._open_window()
        while True:
            self._check_budget()
            self.take_steer()
            await self._summarize_if_due()
            result = await self.step()
            if result.tool_calls:
                await self.act(result)
            elif not self.has_steer:
                raise TurnStopped(_STOP_REASONS.get(result.finish_reason, StopReason.answered))

    def _check_budget(self) -> None:
        if self.steps_taken >= self.budget.steps:
            raise TurnStopped(StopReason.max_steps)
        if self.budget.tokens is not None and self.tokens_spent >= self.budget.tokens:
            raise TurnStopped(StopReason.max_tokens)

    def _runtime_failure(self, exc: Exception) -> Turn:
        """A runtime bug must end the turn cleanly, not hang it."""
        logger.exception("turn %s failed", self.turn.id, exc_info=exc)
        return self.fail(
            ErrorInfo(kind="internal_error", message=f"the agent runtime failed: {exc}")
        )

    def fail(self, error: ErrorInfo) -> Turn:
        self.log.close_open(ItemStatus.failed)
        self.log.note_error(self.turn.id, error)
        return self._end(TurnStatus.failed, StopReason.error, error)

    def _end(self, status: TurnStatus, reason: StopReason, error: ErrorInfo | None = None) -> Turn:
        # Input steered in after the model's last step is logged, not lost: the next turn's
        # prompt carries it.
        self.take_steer()
        self.turn = self.turn.model_copy(
            update={
                "status": status,
                "stop_reason": reason,
                "error": error,
                "completed_at": datetime.now(UTC),
            }
        )
        return self.turn

    async def _summarize_if_due(self, *, force: bool = False) -> bool:
        return await summarize_if_due(
            self.log,
            self.window,
            self.generate,
            turn_id=self.turn.id,
            next_step=self.next_step,
            summary_max_tokens=self.settings.summary_max_tokens,
            temperature=self.settings.temperature,
            force=force,
        )

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
                await self._summarize_if_due(force=True)
            except EngineError as exc:
                if not exc.retryable or attempt == STEP_RETRIES:
                    raise
                self.log.note_error(
                    self.turn.id,
                    ErrorInfo(kind=exc.kind, message=f"{exc.message}; retrying", retryable=True),
                )
                await asyncio.sleep(RETRY_BACKOFF * (attempt + 1))
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _step_once(self) -> GenerationResult:
        messages = self.log.prompt()
        room = self.window.size - self.window.estimate(messages)
        if room < MIN_STEP_TOKENS:
            raise ContextLengthExceeded(f"only {room} tokens of context left for the answer")
        sampling = SamplingParams(
            max_tokens=min(step_token_cap(self.window.size, self.settings.max_step_tokens), room),
            temperature=self.settings.temperature,
        )
        step = self.next_step()
        self.steps_taken += 1
        return await self.generate(messages, sampling, step, purpose="agent")

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
        log = self.log
        request = GenerationRequest(
            messages=messages,
            tools=self.window.tools,
            tool_choice=tool_choice,
            sampling=sampling,
            capture=self.capture,
            model=self.model,
        )
        reasoning: ReasoningItem | None = None
        text = text_item
        started, clock = datetime.now(UTC), time.perf_counter()
        result: GenerationResult | None = None
        self._count_call()
        streamed = _StreamedSoFar(self.settings.repeated_text_chars)
        try:
            async with aclosing(self.engine.generate(request)) as stream:
                async for event in stream:
                    if isinstance(event, ReasoningDelta | EngineText) and streamed.looping(event):
                        result = streamed.cut()
                        break  # closing the stream stops the engine's generation
                    if isinstance(event, ReasoningDelta) and event.text:
                        if reasoning is None:
                            reasoning = log.add(
                                ReasoningItem(id=log.new_id(), turn_id=self.turn.id, step=step)
                            )
                        log.delta(reasoning, TextDelta(text=event.text))
                    elif isinstance(event, EngineText) and event.text:
                        if text is None:
                            text = log.add(
                                AgentMessageItem(id=log.new_id(), turn_id=self.turn.id, step=step)
                            )
                        log.delta(text, TextDelta(text=event.text))
                    elif isinstance(event, Finished):
                        result = event.result
        except EngineError as exc:
            if streamed.chars:  # it ran before it failed
                self._estimate(messages, streamed.chars)
            self._record_call(self.turn.id, step, purpose, request, started, clock, error=exc)
            log.close_open(
                ItemStatus.failed,
                only=[i.id for i in (reasoning, text) if i is not None and i is not text_item],
            )
            raise
        except asyncio.CancelledError:  # interrupted, or out of time: the engine had the prompt
            self._estimate(messages, streamed.chars)
            raise
        if result is None:
            raise EngineError("the engine's stream ended without a result")
        self._record_call(self.turn.id, step, purpose, request, started, clock, result=result)
        if result.usage is None:
            self._estimate(messages, len(result.text) + len(result.reasoning or ""))
        else:
            self._account(result.usage)
        self.window.observe(messages, result.usage)
        if reasoning is not None or result.reasoning:
            if reasoning is None:
                reasoning = log.add(ReasoningItem(id=log.new_id(), turn_id=self.turn.id, step=step))
            log.complete(reasoning, text=result.reasoning)
        if text_item is None and (text is not None or result.text):
            if text is None:
                text = log.add(AgentMessageItem(id=log.new_id(), turn_id=self.turn.id, step=step))
            log.complete(text, text=result.text)
        return result

    def _count_call(self) -> None:
        """Every engine request counts, whether or not it finishes."""
        self._add_usage(model_calls=1)

    def _account(self, usage: Usage) -> None:
        self._add_usage(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_prompt_tokens=usage.cached_tokens,
        )
        self.tokens_spent += usage.prompt_tokens - usage.cached_tokens + usage.completion_tokens

    def _estimate(self, messages: list[ChatMessage], generated_chars: int) -> None:
        """What a call used when the engine did not say (it was cut short, or reports no
        usage): the prompt as the window estimates it, the output from its length."""
        prompt = self.window.estimate(messages)
        completion = math.ceil(generated_chars / CHARS_PER_TOKEN)
        self._add_usage(prompt_tokens=prompt, completion_tokens=completion, estimated=True)
        self.tokens_spent += prompt + completion

    def _add_usage(self, *, estimated: bool = False, **added: int) -> None:
        usage = self.turn.usage
        total = usage.model_copy(
            update={name: getattr(usage, name) + value for name, value in added.items()}
            | {"estimated": usage.estimated or estimated}
        )
        self.turn = self.turn.model_copy(update={"usage": total})

    # ------------------------------------------------------------------ tool calls

    async def act(self, result: GenerationResult) -> None:
        """Run the step's calls in order, consecutive read-only calls together. Items complete
        in call order, so the repetition guard sees the same sequence every run."""
        plans = await plan_calls(
            self.log, self.harness, self.gate, self.turn.id, self.step_number, result.tool_calls
        )
        for plan in plans:
            self.log.add(plan.item)
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
        prepared = plan.prepared
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
            answer = await self._ask_approval(plan.item, prepared, plan.verdict.reason)
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
                self.gate.grant(prepared)

        def stream_output(stream: str, text: str) -> None:
            self.log.delta(plan.item, OutputDelta(stream=stream, text=text))  # type: ignore[arg-type]

        plan.outcome = await self.harness.run(
            prepared, call_id=plan.call.id, turn_id=self.turn.id, on_output=stream_output
        )

    def _decline(self, plan: ToolCallPlan, denial: Denied) -> None:
        plan.outcome = self.harness.failure(plan.call.id, plan.call.name, denial, plan.prepared)
        plan.declined = True

    def _complete(self, plan: ToolCallPlan) -> TurnStopped | None:
        """Complete the call's item; a stop when the same failure keeps repeating."""
        outcome = plan.outcome
        if outcome is None or self.log.item(plan.item.id).status != ItemStatus.in_progress:
            return None
        verdict = Repetition.fine
        if not plan.declined:
            error = outcome.error.message if outcome.error else None
            verdict = self.repetition.observe(
                plan.call.name, plan.call.arguments, outcome.ok, error
            )
        if verdict == Repetition.warn:
            outcome.text += WARNING.format(count=self.repetition.count)
        self.log.complete(plan.item, **completion(plan.item, outcome, declined=plan.declined))
        if outcome.error is not None and outcome.error.kind == DataFolderFull.kind:
            # Its checkpoint could not be recorded: nothing the model can do about that.
            message = outcome.error.message.removeprefix(f"Error ({DataFolderFull.kind}): ")
            full = ErrorInfo(kind=DataFolderFull.kind, message=message)
            return TurnStopped(StopReason.error, TurnStatus.failed, full)
        return TurnStopped(StopReason.repetition) if verdict == Repetition.stop else None


class _StreamedSoFar:
    """A step's reasoning and text as they stream: each watched for a loop, and their length
    the estimate of what a call cut short generated."""

    def __init__(self, min_chars: int) -> None:
        self.reasoning, self.text = TextLoopDetector(min_chars), TextLoopDetector(min_chars)
        self._parts: dict[bool, list[str]] = {True: [], False: []}
        self.chars = 0

    def looping(self, event: ReasoningDelta | EngineText) -> bool:
        reasoning = isinstance(event, ReasoningDelta)
        self._parts[reasoning].append(event.text)
        self.chars += len(event.text)
        return (self.reasoning if reasoning else self.text).feed(event.text)

    def cut(self) -> GenerationResult:
        """The step as far as it streamed, ended as a loop."""
        return GenerationResult(
            text="".join(self._parts[False]),
            reasoning="".join(self._parts[True]),
            finish_reason="repetition",
        )
