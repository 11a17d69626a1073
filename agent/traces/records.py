"""Building the records the trace store keeps beside the event log: each model call as sent
and as sampled (the token layer), and what became of the agent's edits (a reward signal)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from opencomposer.agent.tools.harness_protocol import Harness
from opencomposer.agent.traces.base import ModelCallRecord, Outcome
from opencomposer.serving.engines.base import (
    ChatMessage,
    GenerationRequest,
    GenerationResult,
    ToolSpec,
)
from opencomposer.serving.engines.errors import EngineError


@dataclass
class CallChain:
    """A thread's previous model call as sent, so that the next record keeps only what is new.

    Each step's request is the previous one's messages plus a few, with the same tool specs,
    and its prompt tokens are the previous prompt and completion plus a few: storing each
    whole would grow the store with the square of the thread's length. A record names how
    much it shares with the thread's previous record (`ModelCallRecord.kept_*`), and the
    store gives calls back whole. Text already stored was redacted with the secrets known
    then; when the thread learns a new secret the chain starts over, so the next record is
    redacted whole again.
    """

    messages: Sequence[ChatMessage] = ()
    tools: Sequence[ToolSpec] | None = None
    context_ids: Sequence[int] = ()
    """The previous call's prompt and completion tokens."""

    redactor_version: int = -1

    def record(
        self, request: GenerationRequest, result: GenerationResult | None, redactor_version: int
    ) -> tuple[dict, int, bool, int]:
        """(the request's new part as JSON, messages kept, tools kept, prompt tokens kept),
        and the chain moves on to this call."""
        if redactor_version != self.redactor_version:
            self.messages, self.tools, self.context_ids = (), None, ()
        kept_messages = _shared_messages(self.messages, request.messages)
        kept_tools = self.tools is not None and (
            self.tools is request.tools or self.tools == request.tools
        )
        body = request.model_dump(mode="json", exclude={"messages", "tools"})
        new = request.messages[kept_messages:]
        body = {
            "messages": [m.model_dump(mode="json") for m in new],
            "tools": [] if kept_tools else [t.model_dump(mode="json") for t in request.tools],
            **body,
        }
        tokens = result.tokens if result else None
        prompt = tokens.prompt_token_ids if tokens and tokens.prompt_token_ids else []
        kept_tokens = _shared_tokens(self.context_ids, prompt)
        self.messages, self.tools = request.messages, request.tools
        self.context_ids = [*prompt, *(tokens.completion_token_ids or [])] if tokens else []
        self.redactor_version = redactor_version
        return body, kept_messages, kept_tools, kept_tokens


def _shared_messages(before: Sequence[ChatMessage], now: Sequence[ChatMessage]) -> int:
    """Leading messages `now` shares with `before`: the same objects (a prompt view reuses
    them), then equal ones (the previous step's, rebuilt)."""
    shared, limit = 0, min(len(before), len(now))
    while shared < limit and before[shared] is now[shared]:
        shared += 1
    while shared < limit and before[shared] == now[shared]:
        shared += 1
    return shared


def _shared_tokens(before: Sequence[int], now: Sequence[int]) -> int:
    if len(before) <= len(now) and now[: len(before)] == before:
        return len(before)  # the usual case: this prompt continues the last call's context
    limit = min(len(before), len(now))
    shared = 0
    while shared < limit and before[shared] == now[shared]:
        shared += 1
    return shared


def model_call_record(
    *,
    thread_id: str,
    turn_id: str,
    step: int,
    purpose: str,
    segment: int,
    request: GenerationRequest,
    started: datetime,
    duration_ms: int,
    engine: str,
    chain: CallChain,
    redactor_version: int,
    result: GenerationResult | None = None,
    error: EngineError | None = None,
) -> ModelCallRecord:
    """The record of one call, as the part of it that is not in `chain`'s previous call."""
    tokens = result.tokens if result else None
    body, kept_messages, kept_tools, kept_tokens = chain.record(request, result, redactor_version)
    prompt_ids = tokens.prompt_token_ids if tokens else None
    return ModelCallRecord(
        thread_id=thread_id,
        turn_id=turn_id,
        step=step,
        purpose=purpose,
        segment=segment,
        request=body,
        kept_messages=kept_messages,
        kept_tools=kept_tools,
        kept_prompt_tokens=kept_tokens,
        started_at=started,
        duration_ms=duration_ms,
        engine=engine,
        model=(result.model if result else None) or request.model,
        response=result.to_json() if result else None,
        error={"kind": error.kind, "message": error.message} if error else None,
        weights_version=tokens.weights_version if tokens else None,
        prompt_token_ids=prompt_ids[kept_tokens:] if prompt_ids is not None else None,
        completion_token_ids=tokens.completion_token_ids if tokens else None,
        logprobs=tokens.logprobs if tokens else None,
        routed_experts=tokens.routed_experts if tokens else None,
    )


async def edit_outcomes(
    harness: Harness, thread_id: str, turn_id: str, when: str = "followup"
) -> list[Outcome]:
    """For each file the turn changed: kept as the agent wrote it, reverted to what it was
    before, or changed since (compared with the turn's checkpoints, and with an editor's
    unsaved buffer where there is one). `when`: `followup` (the user's next request) or
    `session_end` (the client went away without one)."""
    return [
        Outcome(thread_id, f"edit_{edit.state}", {"path": edit.path, "when": when}, turn_id=turn_id)
        for edit in await harness.edit_states(turn_id)
    ]
