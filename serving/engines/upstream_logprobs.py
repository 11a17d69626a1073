"""An OpenAI-compatible server's logprobs object, read into `SampledToken`s.

Two shapes arrive: a chat choice's `content` (each token with its text, bytes and
`top_logprobs` entries) and a text completion's legacy parallel lists (`tokens`,
`token_logprobs`, `top_logprobs` as token -> logprob maps, no bytes). A logprob the server
leaves null (the first token of an echoed prompt) reads as 0.
"""

from typing import Any

from opencomposer.serving.engines.base import SampledToken, TokenLogprob
from opencomposer.serving.engines.errors import EngineProtocolError


def read_logprobs(logprobs: dict[str, Any]) -> list[SampledToken]:
    """The tokens of one chunk's (or one response's) logprobs object, in order."""
    if "token_logprobs" in logprobs:
        return _legacy(logprobs)
    return [_chat_token(entry) for entry in _list(logprobs.get("content"), "content")]


def _chat_token(entry: Any) -> SampledToken:
    token = _token(entry)
    top = tuple(_token(alternative) for alternative in _list(entry.get("top_logprobs"), "top"))
    return SampledToken(token.token, token.bytes, token.logprob, top)


def _token(entry: Any) -> TokenLogprob:
    if not isinstance(entry, dict):
        raise EngineProtocolError(f"malformed chunk from the server: a logprob entry is {entry!r}")
    raw = entry.get("bytes")
    if raw is not None and not (
        isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw)
    ):
        raise EngineProtocolError(f"malformed chunk from the server: token bytes are {raw!r}")
    return TokenLogprob(
        str(entry.get("token") or ""),
        None if raw is None else bytes(raw),
        _float(entry.get("logprob")),
    )


def _legacy(logprobs: dict[str, Any]) -> list[SampledToken]:
    values = _list(logprobs.get("token_logprobs"), "token_logprobs")
    texts = _list(logprobs.get("tokens"), "tokens")
    tops = _list(logprobs.get("top_logprobs"), "top_logprobs")
    tokens = []
    for i, value in enumerate(values):
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        alternatives = sorted(
            (TokenLogprob(str(text), None, _float(lp)) for text, lp in top.items()),
            key=lambda a: a.logprob,
            reverse=True,
        )
        text = str(texts[i]) if i < len(texts) else ""
        tokens.append(SampledToken(text, None, _float(value), tuple(alternatives)))
    return tokens


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise EngineProtocolError(f"malformed chunk from the server: logprobs {what} is {value!r}")
    return value


def _float(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EngineProtocolError(f"malformed chunk from the server: a logprob is {value!r}")
    return float(value)
