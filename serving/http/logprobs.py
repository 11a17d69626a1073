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


def sampled_tokens(trace: TokenTrace | None) -> list[SampledToken] | None:
    """A result's output tokens with their logprobs, named by id where the engine gave no
    text; None when it recorded no logprobs."""
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


def chat_logprobs(tokens: list[SampledToken] | None, top: int) -> dict[str, Any] | None:
    """The `logprobs` of a chat choice (or of one streamed chunk's tokens), with `top`
    alternatives per token; None when there are none."""
    if tokens is None:
        return None
    content = [
        _chat_token(t) | {"top_logprobs": [_chat_token(a) for a in t.top_logprobs[:top]]}
        for t in tokens
    ]
    return {"content": content, "refusal": None}


class TextOffsets:
    """Where each token begins in a completion's returned text, token after token, so that a
    stream's chunks count on from each other. A token that begins inside a character (a
    byte-level piece of it) starts where that character does."""

    def __init__(self, start: int) -> None:
        """`start`: where the output begins in the returned text (after an echoed prompt)."""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._chars = start

    def of(self, token: SampledToken) -> int:
        offset = self._chars
        self._chars += (
            len(self._decoder.decode(token.bytes)) if token.bytes is not None else len(token.token)
        )
        return offset


def completion_logprobs(
    tokens: list[SampledToken] | None, top: int, offsets: TextOffsets
) -> dict[str, Any] | None:
    """The legacy `logprobs` of a text completion (or of one streamed chunk's tokens)."""
    if tokens is None:
        return None
    alternatives = [
        {a.token: _logprob(a.logprob) for a in t.top_logprobs[:top]}
        | {t.token: _logprob(t.logprob)}
        for t in tokens
    ]
    return {
        "tokens": [t.token for t in tokens],
        "token_logprobs": [_logprob(t.logprob) for t in tokens],
        "top_logprobs": alternatives,
        "text_offset": [offsets.of(t) for t in tokens],
    }


class StreamedLogprobs:
    """A stream's logprobs, carried by the chunk of the text they spell, as OpenAI streams
    them: tokens wait here from the engine's `TokensSampled` until the next chunk goes out.
    A backend that sends none while streaming has the whole result's on the finish chunk."""

    def __init__(self) -> None:
        self._waiting: list[SampledToken] = []
        self._streamed = False

    def add(self, tokens: tuple[SampledToken, ...]) -> None:
        self._waiting += tokens
        self._streamed = True

    def take(self) -> list[SampledToken] | None:
        """The tokens for the chunk going out now; None when there are none."""
        waiting, self._waiting = self._waiting, []
        return waiting or None

    def at_finish(self, trace: TokenTrace | None) -> list[SampledToken] | None:
        """The tokens for the finish chunk."""
        return self.take() if self._streamed else sampled_tokens(trace)
