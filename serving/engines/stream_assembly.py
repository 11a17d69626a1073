"""Assembling OpenAI-style chat-completion chunks (and text-completion chunks, which carry
`text` where chat has a delta) into engine events and one result.

Servers differ in the details, so the assembler is strict about meaning and lenient about
shape: a tool call's id and name come first and its argument fragments follow, possibly over
many chunks, interleaved with other calls by `index` (or without one); names may be repeated
in later fragments; usage arrives in a final chunk with no choices; SGLang puts training
extras in an `sglext` object and vLLM puts token ids on each choice. A stream that ends
before a finish reason is an interruption, never a short success.
"""

import base64
import binascii
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opencomposer.serving.engines.base import (
    EngineEvent,
    FinishReason,
    GenerationResult,
    ReasoningDelta,
    SampledToken,
    SpecDecodeStats,
    TextDelta,
    TokensSampled,
    TokenTrace,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    Usage,
)
from opencomposer.serving.engines.errors import (
    EngineProtocolError,
    EngineServerError,
    EngineStreamInterrupted,
)
from opencomposer.serving.engines.tool_text import ParsedToolCall, ToolTextParser
from opencomposer.serving.engines.upstream_logprobs import read_logprobs

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


@dataclass
class _NativeCall:
    upstream_index: int
    """The server's `index` for the call."""

    position: int = -1
    """Index among this generation's calls, assigned when the call starts."""

    id: str | None = None
    name: str = ""
    pending_arguments: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    started: bool = False


def _expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind):
        raise EngineProtocolError(f"malformed chunk from the server: {what} is {value!r}")
    return value


class ChatStreamAssembler:
    """Feed chunk dicts in order; `finish()` once the stream ends."""

    def __init__(self, text_parser: ToolTextParser | None, new_call_id: Callable[[], str]):
        self._text_parser = text_parser
        self._new_call_id = new_call_id
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[ToolCall] = []
        self._native: dict[int, _NativeCall] = {}
        self._last_native: _NativeCall | None = None
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._model: str | None = None
        self._prompt_ids: list[int] | None = None
        self._completion_ids: list[int] | None = None
        self._logprobs: list[float] | None = None
        self._sampled: list[SampledToken] | None = None
        self._routed_experts: np.ndarray | None = None
        self._spec: SpecDecodeStats | None = None

    # ------------------------------------------------------------------ feeding

    def feed(self, chunk: Any) -> list[EngineEvent]:
        _expect(chunk, dict, "the chunk")
        error = chunk.get("error") or (chunk if chunk.get("object") == "error" else None)
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise EngineServerError(f"the server reported an error mid-stream: {message}")
        if isinstance(chunk.get("model"), str):
            self._model = chunk["model"]
        if chunk.get("usage") is not None:
            self._read_usage(_expect(chunk["usage"], dict, "usage"))
        if chunk.get("sglext") is not None:
            self._read_sglext(_expect(chunk["sglext"], dict, "sglext"))
        if chunk.get("prompt_token_ids") is not None:  # vLLM, first chunk
            self._prompt_ids = _int_list(chunk["prompt_token_ids"], "prompt_token_ids")
        events: list[EngineEvent] = []
        for choice in _expect(chunk.get("choices") or [], list, "choices"):
            _expect(choice, dict, "a choice")
            if choice.get("index", 0) == 0:
                self._read_choice(choice, events)
        return events

    def _read_choice(self, choice: dict[str, Any], events: list[EngineEvent]) -> None:
        delta = _expect(choice.get("delta") or {}, dict, "delta")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if choice.get("logprobs"):  # the tokens of this chunk's text, sent ahead of it
            self._read_logprobs(_expect(choice["logprobs"], dict, "logprobs"), events)
        if reasoning:
            self._reasoning.append(_expect(reasoning, str, "reasoning"))
            events.append(ReasoningDelta(reasoning))
        # A text completion's chunk carries `text` on the choice instead of a delta.
        content = delta.get("content") or choice.get("text")
        if content:
            self._read_content(_expect(content, str, "content"), events)
        for call in _expect(delta.get("tool_calls") or [], list, "tool_calls"):
            self._read_native_call(_expect(call, dict, "a tool call"), events)
        if choice.get("token_ids") is not None:  # vLLM: this chunk's completion ids
            self._completion_ids = (self._completion_ids or []) + _int_list(
                choice["token_ids"], "token_ids"
            )
        if isinstance(choice.get("routed_experts"), str):  # vLLM: base64 .npy
            self._routed_experts = _decode_npy(choice["routed_experts"])
        if choice.get("finish_reason"):
            self._finish = _expect(choice["finish_reason"], str, "finish_reason")

    def _read_logprobs(self, logprobs: dict[str, Any], events: list[EngineEvent]) -> None:
        tokens = read_logprobs(logprobs)
        if tokens:
            events.append(TokensSampled(tuple(tokens)))
        self._sampled = (self._sampled or []) + tokens
        self._logprobs = (self._logprobs or []) + [t.logprob for t in tokens]

    def _read_content(self, content: str, events: list[EngineEvent]) -> None:
        if self._text_parser is None:
            self._text.append(content)
            events.append(TextDelta(content))
            return
        for parsed in self._text_parser.feed(content):
            self._emit_parsed(parsed, events)

    def _emit_parsed(self, parsed: Any, events: list[EngineEvent]) -> None:
        if isinstance(parsed, ParsedToolCall):
            call = ToolCall(
                id=parsed.id or self._new_call_id(), name=parsed.name, arguments=parsed.arguments
            )
            index = len(self._calls)
            self._calls.append(call)
            events.append(ToolCallStarted(index, call.id, call.name))
            if call.arguments:
                events.append(ToolCallArgumentsDelta(index, call.arguments))
        else:
            self._text.append(parsed.text)
            events.append(TextDelta(parsed.text))

    def _read_native_call(self, delta: dict[str, Any], events: list[EngineEvent]) -> None:
        call = self._native_call_for(delta)
        function = _expect(delta.get("function") or {}, dict, "function")
        if delta.get("id") and call.id is None:
            call.id = _expect(delta["id"], str, "tool call id")
        name = function.get("name")
        if name and not call.started and not call.name.endswith(name):
            call.name += _expect(name, str, "tool name")
        fragment = function.get("arguments")
        if fragment:
            call.pending_arguments.append(_expect(fragment, str, "tool arguments"))
            # Names always precede arguments, so the first fragment means the name is whole.
            self._start(call, events)

    def _native_call_for(self, delta: dict[str, Any]) -> _NativeCall:
        index = delta.get("index")
        if index is None:  # some servers omit it: a new id starts a new call
            same = self._last_native
            if same is not None and (not delta.get("id") or delta.get("id") == same.id):
                return same
            index = len(self._native)
        call = self._native.get(_expect(index, int, "tool call index"))
        if call is None:
            call = self._native[index] = _NativeCall(upstream_index=index)
        self._last_native = call
        return call

    def _start(self, call: _NativeCall, events: list[EngineEvent]) -> None:
        if not call.started:
            if not call.name:
                raise EngineProtocolError("the server sent tool-call arguments before a name")
            call.started = True
            call.id = call.id or self._new_call_id()
            call.position = len(self._calls)
            self._calls.append(ToolCall(id=call.id, name=call.name))
            events.append(ToolCallStarted(call.position, call.id, call.name))
        if call.pending_arguments:
            text = "".join(call.pending_arguments)
            call.pending_arguments.clear()
            call.arguments.append(text)
            events.append(ToolCallArgumentsDelta(call.position, text))

    def _read_usage(self, usage: dict[str, Any]) -> None:
        details = usage.get("prompt_tokens_details") or {}
        self._usage = Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0)
            if isinstance(details, dict)
            else 0,
        )

    def _read_sglext(self, ext: dict[str, Any]) -> None:
        if ext.get("input_ids") is not None:
            self._prompt_ids = _int_list(ext["input_ids"], "sglext.input_ids")
        outputs = ext.get("output_ids")
        if outputs:
            self._completion_ids = _int_list(_expect(outputs, list, "output_ids")[0], "output_ids")
        if isinstance(ext.get("routed_experts"), str):
            self._routed_experts = _decode_int32(ext["routed_experts"])
        spec = ext.get("spec_tokens_details")
        if isinstance(spec, list):
            spec = spec[0] if spec else None
        if isinstance(spec, dict) and spec.get("spec_verify_ct") is not None:
            self._spec = SpecDecodeStats(
                verify_steps=int(spec["spec_verify_ct"]),
                accept_length=float(spec.get("spec_accept_length") or 0.0),
                accept_rate=spec.get("spec_accept_rate"),
            )

    # ------------------------------------------------------------------ finishing

    def finish(self) -> tuple[list[EngineEvent], GenerationResult]:
        """Flush held-back text and unstarted calls; raise if the stream was cut short."""
        events: list[EngineEvent] = []
        if self._text_parser is not None:
            for parsed in self._text_parser.finish():
                self._emit_parsed(parsed, events)
        for call in sorted(self._native.values(), key=lambda c: c.upstream_index):
            if not call.started and call.name:
                self._start(call, events)
        if self._finish is None:
            raise EngineStreamInterrupted(
                "the server closed the stream before the generation finished"
            )
        for call in self._native.values():
            if call.started:
                self._calls[call.position].arguments = "".join(call.arguments)
        reason = _FINISH_REASONS.get(self._finish)
        if reason is None:
            raise EngineServerError(f"the server ended the generation with {self._finish!r}")
        if self._calls and reason == "stop":
            reason = "tool_calls"  # some servers say `stop` even when they return calls
        return events, GenerationResult(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=list(self._calls),
            finish_reason=reason,
            usage=self._usage,
            model=self._model,
            tokens=self._token_trace(),
            spec=self._spec,
        )

    def _token_trace(self) -> TokenTrace | None:
        if not any(
            x is not None
            for x in (self._prompt_ids, self._completion_ids, self._logprobs, self._routed_experts)
        ):
            return None
        experts = self._routed_experts
        if experts is not None and experts.ndim == 1 and self._usage is not None:
            positions = self._usage.prompt_tokens + self._usage.completion_tokens - 1
            if positions > 0 and experts.size % positions == 0:
                experts = experts.reshape(positions, -1)
        return TokenTrace(
            prompt_token_ids=self._prompt_ids,
            completion_token_ids=self._completion_ids,
            logprobs=self._logprobs,
            sampled=self._sampled,
            routed_experts=experts,
        )


def _int_list(value: Any, what: str) -> list[int]:
    items = _expect(value, list, what)
    if not all(isinstance(x, int) for x in items):
        raise EngineProtocolError(f"malformed chunk from the server: {what} holds non-integers")
    return items


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise EngineProtocolError(
            f"malformed chunk from the server: {what} is not base64"
        ) from None


def _decode_int32(value: str) -> np.ndarray:
    raw = _b64(value, "routed_experts")
    if len(raw) % 4:
        raise EngineProtocolError("malformed routed_experts: not a whole number of int32")
    return np.frombuffer(raw, dtype=np.int32).copy()


def _decode_npy(value: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(_b64(value, "routed_experts")), allow_pickle=False)
    except ValueError as exc:
        raise EngineProtocolError(f"malformed routed_experts: {exc}") from None
