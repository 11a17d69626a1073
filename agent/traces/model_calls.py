"""Model calls as a store keeps them: redacted, the token layer packed, and each call only as
what it adds to the thread's previous call (`records.CallChain`), put back whole on reading.

Token layer: ids are stored as little-endian int32, logprobs as float32, routed experts as
int32 with their shape, exactly as sampled; they are never re-tokenized.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from opencomposer.agent.traces.base import ModelCallRecord
from opencomposer.redact import Redactor

KEPT = ("kept_messages", "kept_tools", "kept_prompt_tokens")


@dataclass
class RedactedCall:
    """A call's text fields as JSON, secrets masked; `redacted` says whether masking changed
    any of them (the token ids cannot be masked, so training can leave such a call out)."""

    request: str
    response: str | None
    error: str | None
    redacted: bool


def redact_call(call: ModelCallRecord, redactor: Redactor) -> RedactedCall:
    texts: dict[str, str | None] = {}
    redacted = False
    for name in ("request", "response", "error"):
        value = getattr(call, name)
        if value is None:
            texts[name] = None
            continue
        plain = json.dumps(value, ensure_ascii=False, default=str)
        masked = redactor.redact(plain)
        texts[name] = masked
        redacted |= masked != plain
    assert texts["request"] is not None
    return RedactedCall(texts["request"], texts["response"], texts["error"], redacted)


def keeps_any(call: ModelCallRecord) -> bool:
    return bool(call.kept_messages or call.kept_tools or call.kept_prompt_tokens)


def pack(values: Iterable[float] | None, dtype: type) -> bytes | None:
    if values is None:
        return None
    return np.asarray(list(values), dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def unpack(blob: bytes | None, dtype: str) -> list | None:
    return None if blob is None else np.frombuffer(blob, dtype).tolist()


def pack_experts(experts: np.ndarray | None) -> tuple[bytes | None, str | None]:
    if experts is None:
        return None, None
    return np.ascontiguousarray(experts, "<i4").tobytes(), json.dumps(list(experts.shape))


def unpack_experts(blob: bytes | None, shape: str | None) -> list | None:
    if blob is None or shape is None:
        return None
    return np.frombuffer(blob, "<i4").reshape(json.loads(shape)).tolist()


def whole_calls(stored: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A thread's calls in order, as stored (each with the `KEPT` counts and only its new
    messages and prompt tokens), put back as sent: each kept part is taken from the call
    before it, already whole. Calls share the message objects they have in common: read
    them, do not modify them."""
    calls: list[dict[str, Any]] = []
    messages: list[Any] = []
    tools: list[Any] = []
    context: list[int] = []
    for call in stored:
        kept_messages, kept_tools, kept_tokens = (call.pop(name) for name in KEPT)
        request = call["request"]
        if kept_messages:
            request["messages"] = [*messages[:kept_messages], *request.get("messages", [])]
        if kept_tools:
            request["tools"] = list(tools)
        prompt = call["prompt_token_ids"]
        if prompt is not None and kept_tokens:
            prompt = call["prompt_token_ids"] = [*context[:kept_tokens], *prompt]
        messages, tools = request.get("messages", []), request.get("tools", [])
        context = [*(prompt or []), *(call["completion_token_ids"] or [])]
        calls.append(call)
    return calls
