"""Building the records the trace store keeps beside the event log: each model call as sent
and as sampled (the token layer), and what became of the agent's edits (a reward signal)."""

from datetime import datetime

from opencomposer.agent.tools.harness_protocol import Harness
from opencomposer.agent.traces.store import ModelCallRecord, Outcome
from opencomposer.serving.engines.base import GenerationRequest, GenerationResult
from opencomposer.serving.engines.errors import EngineError


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
    result: GenerationResult | None = None,
    error: EngineError | None = None,
) -> ModelCallRecord:
    tokens = result.tokens if result else None
    return ModelCallRecord(
        thread_id=thread_id,
        turn_id=turn_id,
        step=step,
        purpose=purpose,
        segment=segment,
        request=request.model_dump(mode="json"),
        started_at=started,
        duration_ms=duration_ms,
        engine=engine,
        model=(result.model if result else None) or request.model,
        response=result.to_json() if result else None,
        error={"kind": error.kind, "message": error.message} if error else None,
        weights_version=tokens.weights_version if tokens else None,
        prompt_token_ids=tokens.prompt_token_ids if tokens else None,
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
