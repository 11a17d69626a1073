"""The engine protocol: one async streaming interface for every model backend.

In: chat messages in the OpenAI shape, tool JSON schemas, sampling parameters, and what the
caller wants captured for training. Out: a stream of deltas (text, reasoning, tool-call
starts and argument fragments) that always ends with one `Finished` carrying the assembled
result: text, tool calls, finish reason, usage and, when asked, token ids, logprobs, routed
experts and speculative-decoding statistics recorded at sampling time.

A stream is an async generator. Consumers that may stop early must close it (use
`contextlib.aclosing`, or `complete()`), which cancels the request upstream.
"""

import json
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from opencomposer.serving.engines.errors import EngineProtocolError

if TYPE_CHECKING:  # torch loads only with the embedded engine, never for a remote backend
    from torch import Tensor

Weights: TypeAlias = "Mapping[str, Tensor] | Path"
"""New weights for `Engine.update_weights`: named tensors, or a safetensors file."""

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "repetition"]
"""OpenAI's reasons, and `repetition`: set only by the agent, which cut a step whose output
was stuck in a loop (engines never report it, so the OpenAI surface never shows it)."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCall(_Wire):
    id: str
    name: str
    arguments: str = ""
    """Raw JSON text as the model produced it; it may be invalid, and the caller decides."""

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object; raises ValueError when they are not a JSON object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return value

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


class ChatMessage(_Wire):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    reasoning: str | None = None
    """An assistant's thinking, kept for the trace; backends decide whether to send it back."""

    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    """For `tool` messages: the call this result answers."""

    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        content = self.content
        if content is None and self.tool_calls:
            # OpenAI takes null or "" beside tool calls; llama-cpp-python 0.3.36 refuses null
            # (its request model wants a string), so the form every server takes is sent.
            content = ""
        message: dict[str, Any] = {"role": self.role, "content": content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            message["name"] = self.name
        return message


class ToolSpec(_Wire):
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class SamplingParams(_Wire):
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    stop: list[str] = Field(default_factory=list)
    seed: int | None = None


class Capture(_Wire):
    """What to record at sampling time for training (costly; off by default)."""

    token_ids: bool = False
    logprobs: bool = False
    top_logprobs: int = Field(default=0, ge=0, le=20)
    """With `logprobs`: how many most likely alternatives to record at each output token."""

    routed_experts: bool = False
    spec_stats: bool = False


class TextPrompt(_Wire):
    """A prompt given as text, not as a conversation: no chat template is applied.

    Without `suffix` the model continues `prefix`. With `suffix` it fills the middle between
    the two (an editor's inline completion at the cursor), in the model's own
    fill-in-the-middle format where it has one; a model without one continues `prefix`, and
    trimming what repeats the suffix is left to the caller."""

    prefix: str
    suffix: str | None = None


class ResponseFormat(_Wire):
    """The reply must be JSON: any object (`json_object`), or a value of `json_schema` (an
    OpenAI `json_schema` format, whose `name`, `description` and `strict` are kept for
    backends that forward it)."""

    type: Literal["json_object", "json_schema"]
    name: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] | None = None
    """The schema of the reply; None with `json_schema` means any JSON value."""

    strict: bool | None = None

    def reply_schema(self) -> dict[str, Any]:
        """The JSON schema the reply must match."""
        if self.type == "json_object":
            return {"type": "object"}
        return self.json_schema if self.json_schema is not None else {}

    def to_openai(self) -> dict[str, Any]:
        if self.type == "json_object":
            return {"type": "json_object"}
        spec: dict[str, Any] = {"name": self.name or "response"}
        for key, value in (
            ("description", self.description),
            ("schema", self.json_schema),
            ("strict", self.strict),
        ):
            if value is not None:
                spec[key] = value
        return {"type": "json_schema", "json_schema": spec}


class GenerationRequest(_Wire):
    messages: list[ChatMessage] = Field(default_factory=list)
    """The conversation; empty exactly when `prompt` is given."""

    prompt: TextPrompt | None = None
    """A raw or fill-in-the-middle prompt instead of a conversation (completions)."""

    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: Literal["auto", "none", "required"] | str | None = None
    """`auto`, `none`, `required`, or the name of the one tool the model must call; None is
    the engine's default (auto), and is not sent upstream (some servers read a missing
    choice as `none`, others an explicit one as a request to constrain)."""

    parallel_tool_calls: bool | None = None
    """False: at most one tool call (the embedded engine ends the reply after it); None: the
    engine's default, which allows several."""

    response_format: ResponseFormat | None = None
    """JSON the reply must be; None: free text."""

    sampling: SamplingParams = Field(default_factory=SamplingParams)
    capture: Capture = Field(default_factory=Capture)
    model: str | None = None
    """Model id; the engine's configured model when unset."""

    stream: bool = True
    """Whether the caller reads the output as it is produced. False lets a backend ask for
    the whole answer at once (some servers only call tools, or count usage, that way); the
    events are the same either way, delivered when the answer is complete."""

    def prompt_chars(self) -> int:
        """Characters of the prompt's text: a size estimate for engines without a tokenizer."""
        if self.prompt is not None:
            return len(self.prompt.prefix) + len(self.prompt.suffix or "")
        return sum(len(m.content or "") for m in self.messages)

    @model_validator(mode="after")
    def _one_prompt(self) -> "GenerationRequest":
        if (self.prompt is None) == (not self.messages):
            raise ValueError("give either messages or a text prompt, not both or neither")
        if self.prompt is not None and self.tools:
            raise ValueError("tools need a conversation; a text prompt cannot offer them")
        return self


# --------------------------------------------------------------------------- stream events


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    index: int
    """Position of the call in this generation, from 0."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgumentsDelta:
    index: int
    text: str


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A token as OpenAI's logprobs show it: its text, its exact bytes, its log-probability.

    `bytes` is exactly the token's (None when the backend does not say): a byte-level token
    holding part of a multi-byte character has bytes that are not UTF-8 on their own, and
    its `token` text shows them escaped (`\\xe4`), as OpenAI does."""

    token: str
    bytes: bytes | None
    logprob: float


@dataclass(frozen=True, slots=True)
class SampledToken(TokenLogprob):
    """An output token with the most likely tokens at its position, best first."""

    top_logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(slots=True)
class TokenTrace:
    """Token-level record of a generation, as sampled (never re-tokenized)."""

    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    """Log-probability of each sampled completion token."""

    sampled: list[SampledToken] | None = None
    """The output's tokens as text, with their alternatives when `Capture.top_logprobs` asks,
    for the OpenAI surface; set with `logprobs` by engines that know the tokens' text. Only
    the tokens the output's text is made of (a stop token ending it is not one of them), so
    it may be shorter than `logprobs`; model-call records do not store it."""

    routed_experts: np.ndarray | None = None
    """int32 [positions, layers * top_k]: experts chosen at each position (prompt and
    completion, last position excluded), for router replay."""

    weights_version: str | None = None


@dataclass(slots=True)
class SpecDecodeStats:
    verify_steps: int
    """Forward passes of the target model that verified drafts."""

    accept_length: float
    """Mean tokens produced per verify step (1 means no draft was ever accepted)."""

    accept_rate: float | None = None
    """Accepted draft tokens / proposed draft tokens."""

    drafted: int | None = None
    """Draft tokens proposed, when the engine says."""


@dataclass(slots=True)
class GenerationResult:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    usage: Usage | None = None
    model: str | None = None
    tokens: TokenTrace | None = None
    spec: SpecDecodeStats | None = None

    def with_weights_version(self, version: str) -> "GenerationResult":
        """This result stamped with the weights it was sampled with, for a backend that
        knows the version only from its own `update_weights` (the server does not say)."""
        tokens = replace(self.tokens or TokenTrace(), weights_version=version)
        return replace(self, tokens=tokens)

    def to_json(self) -> dict[str, Any]:
        """The readable part of the result (the token layer is recorded separately)."""
        usage, spec = self.usage, self.spec
        return {
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": [call.model_dump() for call in self.tool_calls],
            "finish_reason": self.finish_reason,
            "model": self.model,
            "usage": None
            if usage is None
            else {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cached_tokens": usage.cached_tokens,
            },
            "spec": None
            if spec is None
            else {
                "verify_steps": spec.verify_steps,
                "accept_length": spec.accept_length,
                "accept_rate": spec.accept_rate,
                "drafted": spec.drafted,
            },
        }


@dataclass(frozen=True, slots=True)
class Finished:
    """Always the last event of a successful stream."""

    result: GenerationResult


@dataclass(frozen=True, slots=True)
class TokensSampled:
    """Output tokens with their logprobs as they are sampled, sent only when the request
    captures logprobs, so a stream can carry each chunk's logprobs with it (as OpenAI's
    does). They come before the text they spell; the text of a character split across tokens
    follows its last token. The result's `TokenTrace.sampled` holds them all again."""

    tokens: tuple[SampledToken, ...]


EngineEvent = (
    TextDelta | ReasoningDelta | ToolCallStarted | ToolCallArgumentsDelta | TokensSampled | Finished
)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    id: str
    context_window: int | None = None
    """Maximum prompt + completion tokens, when the server says."""

    owned_by: str | None = None

    fills_middle: bool | None = None
    """Whether a `TextPrompt` suffix is honoured (the model has FIM tokens); None when the
    backend cannot tell (a remote server decides for itself)."""


class Engine(Protocol):
    """A model backend. Implementations: `openai` (any OpenAI-compatible server)."""

    async def models(self) -> list[ModelInfo]:
        """Models the backend can serve."""
        ...

    def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream one generation; raises `EngineError` subclasses, never hangs past the
        configured timeouts. Closing the iterator cancels the request."""
        ...

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        """Serve new weights from the next request on: named tensors (or a safetensors file)
        replacing the parameters they name, or added to them when `delta`. Applied between
        requests, never inside one, with every cached prefix dropped (it was computed with
        the old weights); results report `version` as their `tokens.weights_version`.
        Raises `EngineRequestError` where the backend cannot take weights, and leaves the
        served weights as they were when an update does not fit the model."""
        ...

    async def aclose(self) -> None:
        """Release connections and processes."""
        ...


async def complete(engine: Engine, request: GenerationRequest) -> GenerationResult:
    """Run a generation to the end and return its result."""
    async with aclosing(engine.generate(request)) as stream:
        async for event in stream:
            if isinstance(event, Finished):
                return event.result
    raise EngineProtocolError("the engine's stream ended without a result")
