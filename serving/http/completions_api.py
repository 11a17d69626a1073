"""`POST /v1/completions`: OpenAI's text-completion endpoint, for raw prompts and for
fill-in-the-middle (`suffix`), which is what editor completion clients send.

The prompt reaches the engine as text, with no chat template; with a suffix the engine fills the
middle in the model's own FIM format. Errors, validation and streaming follow the chat endpoint
(`model_api`), so an SDK sees the same statuses and the same `[DONE]` ending.
"""

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import Field, ValidationError, field_validator

from opencomposer.serving.engines.base import (
    Capture,
    EngineEvent,
    Finished,
    GenerationRequest,
    GenerationResult,
    SampledToken,
    SamplingParams,
    TextDelta,
    TextPrompt,
    TokensSampled,
)
from opencomposer.serving.http.agent_chat import AGENT_MODEL
from opencomposer.serving.http.errors import translating_route
from opencomposer.serving.http.logprobs import (
    StreamedLogprobs,
    TextOffsets,
    completion_logprobs,
    sampled_tokens,
)
from opencomposer.serving.http.model_api import (
    INT64,
    Envelope,
    OpenAIError,
    State,
    StreamOptions,
    check_max_tokens,
    default_temperature,
    openai_error_response,
    resolve_model,
    respond,
    usage_field,
    usage_json,
    validation_error,
)
from opencomposer.serving.http.openai_arguments import (
    PENALTIES_OFF,
    OpenAIRequest,
)

router = APIRouter(route_class=translating_route(openai_error_response))

OPENAI_DEFAULT_MAX_TOKENS = 16
"""OpenAI's default for this endpoint; clients that rely on it expect short answers."""


class CompletionRequest(OpenAIRequest):
    DESCRIPTIVE = frozenset({"user"})
    OFF = PENALTIES_OFF

    model: str
    prompt: str | list[str]
    suffix: str | None = None
    max_tokens: int = Field(default=OPENAI_DEFAULT_MAX_TOKENS, ge=1, le=INT64)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=-INT64 - 1, le=INT64)
    logprobs: int | None = Field(default=None, ge=0, le=5)
    echo: bool = False
    n: int = 1
    best_of: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | list[str]) -> str | list[str]:
        if isinstance(prompt, list) and len(prompt) != 1:
            raise ValueError("give one prompt: send one request per prompt")
        return prompt

    @field_validator("n", "best_of")
    @classmethod
    def _one_choice(cls, value: int | None) -> int | None:
        if value not in (None, 1):
            raise ValueError("only 1 is supported: send one request per choice")
        return value

    @property
    def prompt_text(self) -> str:
        return self.prompt[0] if isinstance(self.prompt, list) else self.prompt

    def to_generation(self, default_temperature: float | None) -> GenerationRequest:
        if self.echo and self.suffix is not None:
            raise OpenAIError(400, "echo cannot be combined with suffix", param="echo")
        stop = [self.stop] if isinstance(self.stop, str) else self.stop or []
        wants_logprobs = self.logprobs is not None
        return GenerationRequest(
            prompt=TextPrompt(prefix=self.prompt_text, suffix=self.suffix),
            sampling=SamplingParams(
                temperature=default_temperature if self.temperature is None else self.temperature,
                top_p=self.top_p,
                max_tokens=self.max_tokens,
                stop=stop,
                seed=self.seed,
            ),
            capture=Capture(
                logprobs=wants_logprobs, token_ids=wants_logprobs, top_logprobs=self.logprobs or 0
            ),
            model=self.model,
        )


@router.post("/v1/completions")
async def completions(body: CompletionRequest, state: State, request: Request) -> Response:
    if body.model == AGENT_MODEL:
        raise OpenAIError(
            400,
            f"{AGENT_MODEL} is an agent: chat with it through /v1/chat/completions",
            param="model",
            code="model_not_supported",
        )
    model = await resolve_model(state, body.model)
    await check_max_tokens(state, model, body.max_tokens, "max_tokens")
    if body.suffix is not None:
        await _check_fills_middle(state, model)
    try:
        generation = body.to_generation(default_temperature(state))
    except ValidationError as exc:
        raise validation_error(exc) from None
    reply = TextReply(
        model=model, echo=body.prompt_text if body.echo else "", logprobs=body.logprobs
    )
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    return await respond(
        state.engine,
        generation,
        reply,
        stream=body.stream,
        include_usage=include_usage,
        request=request,
    )


async def _check_fills_middle(state: State, model: str) -> None:
    """A suffix the model cannot use is refused: continuing the prefix alone would answer as
    if the suffix had been read. Backends that cannot tell pass the suffix on."""
    served = await state.models()
    if next((m.fills_middle for m in served if m.id == model), None) is not False:
        return
    others = [m.id for m in served if m.fills_middle]
    raise OpenAIError(
        400,
        f"{model} has no fill-in-the-middle tokens, so it cannot honour suffix: leave suffix "
        "out, or serve a model that has them ("
        + ", ".join([*others, "tiny-moe (`opencomposer models init tiny-moe`)"])
        + ", or a checkpoint with StarCoder, Qwen2.5-Coder or DeepSeek-Coder FIM tokens)",
        param="suffix",
        code="fim_not_supported",
    )


class TextReply(Envelope):
    """`text_completion` objects. Logprobs cover the completion's tokens (an echoed prompt's
    are not scored), with offsets into the returned text, echo included."""

    KIND = "text_completion"

    def __init__(self, *, model: str, echo: str, logprobs: int | None) -> None:
        """`logprobs`: alternatives per token; None when logprobs were not asked for."""
        super().__init__(prefix="cmpl", model=model)
        self.echo = echo
        self.logprobs = logprobs
        self._streamed_logprobs = StreamedLogprobs()
        self._streamed_offsets = TextOffsets(len(echo))

    def _choice(
        self, text: str, finish_reason: str | None = None, logprobs: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}

    def completion(self, result: GenerationResult) -> dict[str, Any]:
        logprobs = self._logprobs(sampled_tokens(result.tokens), TextOffsets(len(self.echo)))
        choice = self._choice(self.echo + result.text, result.finish_reason, logprobs)
        return self._envelope(self.KIND, [choice]) | usage_field(result)

    def opening(self) -> list[dict[str, Any]]:
        return [self._envelope(self.KIND, [self._choice(self.echo)])] if self.echo else []

    def chunks(self, event: EngineEvent, include_usage: bool) -> list[dict[str, Any]]:
        """The chunks one engine event becomes, each with the logprobs of the tokens sampled
        since the last one."""
        match event:
            case TokensSampled(tokens):
                self._streamed_logprobs.add(tokens)
            case TextDelta(text):
                logprobs = self._logprobs(self._streamed_logprobs.take(), self._streamed_offsets)
                return [self._envelope(self.KIND, [self._choice(text, logprobs=logprobs)])]
            case Finished(result):
                logprobs = self._logprobs(
                    self._streamed_logprobs.at_finish(result.tokens), self._streamed_offsets
                )
                chunks = [
                    self._envelope(self.KIND, [self._choice("", result.finish_reason, logprobs)])
                ]
                if include_usage:
                    chunks.append(self._envelope(self.KIND, []) | {"usage": usage_json(result)})
                return chunks
        return []

    def _logprobs(
        self, tokens: list[SampledToken] | None, offsets: TextOffsets
    ) -> dict[str, Any] | None:
        if self.logprobs is None:
            return None
        return completion_logprobs(tokens, self.logprobs, offsets)
