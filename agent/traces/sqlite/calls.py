"""Model calls in the trace database: one row each, holding what the call adds to the
thread's previous row (`model_calls.whole_calls` puts them back together)."""

import json
import sqlite3
from typing import Any

import numpy as np

from opencomposer.agent.traces.base import ModelCallRecord
from opencomposer.agent.traces.model_calls import (
    RedactedCall,
    keeps_any,
    pack,
    pack_experts,
    unpack,
    unpack_experts,
    whole_calls,
)


def insert_call(db: sqlite3.Connection, call: ModelCallRecord, texts: RedactedCall) -> None:
    """A call that keeps part of the previous one is flagged redacted when that one was: the
    kept token ids hold what was masked there."""
    experts, shape = pack_experts(call.routed_experts)
    db.execute(
        "INSERT INTO model_calls (thread_id, turn_id, step, purpose, segment, engine, model, "
        "weights_version, request, response, error, redacted, prompt_token_ids, "
        "completion_token_ids, logprobs, routed_experts, routed_experts_shape, started_at, "
        "duration_ms, kept_messages, kept_tools, kept_prompt_tokens) VALUES (?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ? OR (? AND COALESCE((SELECT redacted FROM model_calls WHERE "
        "thread_id = ? ORDER BY id DESC LIMIT 1), 0)), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            call.thread_id,
            call.turn_id,
            call.step,
            call.purpose,
            call.segment,
            call.engine,
            call.model,
            call.weights_version,
            texts.request,
            texts.response,
            texts.error,
            int(texts.redacted),
            int(keeps_any(call)),
            call.thread_id,
            pack(call.prompt_token_ids, np.int32),
            pack(call.completion_token_ids, np.int32),
            pack(call.logprobs, np.float32),
            experts,
            shape,
            call.started_at.isoformat(),
            call.duration_ms,
            call.kept_messages,
            int(call.kept_tools),
            call.kept_prompt_tokens,
        ),
    )


def read_calls(db: sqlite3.Connection, thread_id: str) -> list[dict[str, Any]]:
    cursor = db.cursor()
    cursor.row_factory = sqlite3.Row
    rows = cursor.execute(
        "SELECT * FROM model_calls WHERE thread_id = ? ORDER BY id", (thread_id,)
    ).fetchall()
    stored = []
    for row in rows:
        call = dict(row)
        for key in ("request", "response", "error"):
            call[key] = None if call[key] is None else json.loads(call[key])
        call["redacted"] = bool(call["redacted"])
        call["kept_tools"] = bool(call["kept_tools"])
        call["prompt_token_ids"] = unpack(call["prompt_token_ids"], "<i4")
        call["completion_token_ids"] = unpack(call["completion_token_ids"], "<i4")
        call["logprobs"] = unpack(call["logprobs"], "<f4")
        call["routed_experts"] = unpack_experts(
            call["routed_experts"], call.pop("routed_experts_shape")
        )
        stored.append(call)
    return whole_calls(stored)
