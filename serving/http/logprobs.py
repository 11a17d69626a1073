"""OpenAI's two logprobs objects, rendered from a result's `TokenTrace`.

Chat completions show `content`: each output token with its text, exact UTF-8 bytes,
logprob and its `top_logprobs` alternatives. Text completions show the legacy object:
parallel lists of `tokens`, `token_logprobs`, `top_logprobs` (token -> logprob, the sampled
token always among them, as OpenAI documents: up to N + 1 entries) and `text_offset`, where
each token starts in the returned text.

The engine that knows the tokens' text says it in `TokenTrace.sampled`. A backend that
reports only ids and values gets its tokens named `token_id:N` (vLLM's convention for
tokens returned as ids), with no bytes and no alternatives.
"""

import codecs
from typing import Any

from opencomposer.serving.engines.base import SampledToken, TokenLogprob, TokenTrace

LOGPROB_FLOOR = -9999.0
"""What OpenAI shows for a token that cannot be sampled (top-k or top-p removed it, so its
logprob is -inf, which JSON cannot carry)."""


def _sampled(trace: TokenTrace | None) -> list[SampledToken] | None:
    if trace is None:
        return None
    if trace.sampled is not None:
        return trace.sampled
    if trace.logprobs is None:
        return None
    ids = trace.completion_token_ids or []
    return [
        SampledToken(f"token_id:{ids[i]}" if i < len(ids) else "", None, logprob)
        for i, logprob in enumerate(trace.logprobs)
    ]


def _logprob(value: float) -> float:
    return max(value, LOGPROB_FLOOR)


def _chat_token(token: TokenLogprob) -> dict[str, Any]:
    return {
        "token": token.token,
        "logprob": _logprob(token.logprob),
        "bytes": None if token.bytes is None else list(token.bytes),
    }


def chat_logprobs(trace: TokenTrace | None, top: int) -> dict[str, Any] | None:
    """The `logprobs` of a chat choice, with `top` alternatives per token; None when the
    result has none."""
    tokens = _sampled(trace)
    if tokens is None:
        return None
    content = [
        _chat_token(t) | {"top_logprobs": [_chat_token(a) for a in t.top_logprobs[:top]]}
        for t in tokens
    ]
    return {"content": content, "refusal": None}


def completion_logprobs(trace: TokenTrace | None, top: int, start: int) -> dict[str, Any] | None:
    """The legacy `logprobs` of a text completion whose output begins at character `start`
    of the returned text (after an echoed prompt). A token that begins inside a character
    (a byte-level piece of it) starts where that character does."""
    tokens = _sampled(trace)
    if tokens is None:
        return None
    offsets = []
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    chars = start
    for token in tokens:
        offsets.append(chars)
        chars += len(decoder.decode(token.bytes)) if token.bytes is not None else len(token.token)
    alternatives = [
        {a.token: _logprob(a.logprob) for a in t.top_logprobs[:top]}
        | {t.token: _logprob(t.logprob)}
        for t in tokens
    ]
    return {
        "tokens": [t.token for t in tokens],
        "token_logprobs": [_logprob(t.logprob) for t in tokens],
        "top_logprobs": alternatives,
        "text_offset": offsets,
    }
