"""The OpenAI-compatible model endpoints: `GET /v1/models` and `POST /v1/chat/completions`.

Any OpenAI client (SDKs, editors, eval harnesses) can use the server's engine directly. Requests
are validated against the OpenAI shape and translated into a `GenerationRequest`; the engine's
event stream comes back as a `chat.completion`, or as `chat.completion.chunk` server-sent
events. Every failure on these routes, request validation included, has OpenAI's error shape
and status, because the SDKs pick their exception class from the status and read the body.

The model id `opencomposer-agent` names the agent, not a raw model: with an
`X-Opencomposer-Thread` header the completion is one agent turn in that thread (`agent_chat`).
"""

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.session import SessionError
from opencomposer.serving.engines.base import (
    Capture,
    ChatMessage,
    Engine,
    EngineEvent,
    Finished,
    GenerationRequest,
    GenerationResult,
    ReasoningDelta,
    ResponseFormat,
    SampledToken,
    SamplingParams,
    TextDelta,
    TokensSampled,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    ToolSpec,
)
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineError,
    EngineProtocolError,
    EngineRateLimited,
    EngineRequestError,
    EngineTimeout,
    EngineUnavailable,
    ModelNotFound,
)
from opencomposer.serving.http.agent_chat import AGENT_MODEL, THREAD_HEADER, AgentChatEngine
from opencomposer.serving.http.errors import describe, translating_route, validation_problems
from opencomposer.serving.http.logprobs import StreamedLogprobs, chat_logprobs, sampled_tokens
from opencomposer.serving.http.openai_arguments import (
    OPENAI_DEFAULT_TEMPERATURE,
    PENALTIES_OFF,
    OpenAIBody,
    OpenAIRequest,
)
from opencomposer.serving.http.state import ServerState, server_state


class OpenAIError(Exception):
    """A failure to send in OpenAI's error shape with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = {
            "error": {"message": message, "type": error_type, "param": param, "code": code}
        }


def engine_error(exc: EngineError) -> OpenAIError:
    """The status a client should see for an engine failure: its own mistakes are 400s, the
    backend's are 5xx (retryable ones distinguished, so SDK retries do the right thing)."""
    if isinstance(exc, ContextLengthExceeded):
        return OpenAIError(400, exc.message, code="context_length_exceeded")
    if isinstance(exc, ModelNotFound):
        # The upstream refused the model asked for (a name passed through to it).
        return OpenAIError(404, exc.message, param="model", code=exc.kind)
    if isinstance(exc, EngineRequestError):
        return OpenAIError(400, exc.message, code=exc.kind)
    if isinstance(exc, EngineRateLimited):
        return OpenAIError(429, exc.message, error_type="rate_limit_error", code=exc.kind)
    if isinstance(exc, EngineUnavailable):
        return OpenAIError(503, exc.message, error_type="server_error", code=exc.kind)
    if isinstance(exc, EngineTimeout):
        return OpenAIError(504, exc.message, error_type="server_error", code=exc.kind)
    # Upstream 5xx, malformed or interrupted streams, and our credentials refused upstream:
    # none is the client's fault, all are a bad gateway from its point of view.
    return OpenAIError(502, exc.message, error_type="server_error", code=exc.kind)


def validation_error(exc: RequestValidationError | ValidationError) -> OpenAIError:
    """One 400 naming every invalid field; `param` is the first one, as OpenAI reports it."""
    problems = validation_problems(exc)
    param = problems[0][0] if problems else ""
    return OpenAIError(400, describe(problems), param=param or None)


def openai_error_response(exc: Exception) -> Response | None:
    """`OpenAIError` and request validation errors (malformed JSON included) in OpenAI's
    shape."""
    if isinstance(exc, RequestValidationError):
        exc = validation_error(exc)
    if isinstance(exc, OpenAIError):
        return JSONResponse(exc.body, status_code=exc.status)
    return None


router = APIRouter(route_class=translating_route(openai_error_response))
State = Annotated[ServerState, Depends(server_state)]

INT64 = 2**63 - 1
"""OpenAI's integers are 64-bit: a larger seed or token count is a 400 here, not a failure
deep in an engine (torch refuses a seed past 64 bits, SQLite an integer)."""


# --------------------------------------------------------------------------- request shape


class TextPart(OpenAIBody):
    type: Literal["text"]
    text: str


class FunctionCallIn(OpenAIBody):
    name: str
    arguments: str = ""


class ToolCallIn(OpenAIBody):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallIn


class MessageIn(OpenAIBody):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def to_message(self) -> ChatMessage:
        content = self.content
        if isinstance(content, list):
            content = "".join(part.text for part in content)
        # `developer` is OpenAI's newer name for the system role.
        role = "system" if self.role == "developer" else self.role
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
            for c in self.tool_calls or []
        ]
        return ChatMessage(
            role=role,
            content=content,
            tool_calls=calls,
            tool_call_id=self.tool_call_id,
            name=self.name,
        )


class FunctionDef(OpenAIBody):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolIn(OpenAIBody):
    type: Literal["function"]
    function: FunctionDef


class FunctionName(OpenAIBody):
    name: str


class NamedToolChoice(OpenAIBody):
    type: Literal["function"]
    function: FunctionName


class TextFormat(OpenAIBody):
    type: Literal["text"]


class JsonObjectFormat(OpenAIBody):
    type: Literal["json_object"]


class JsonSchemaSpec(OpenAIBody):
    name: str
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class JsonSchemaFormat(OpenAIBody):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


def response_format(
    given: TextFormat | JsonObjectFormat | JsonSchemaFormat | None,
) -> ResponseFormat | None:
    """The engine's form of OpenAI's `response_format` (None: free text)."""
    if isinstance(given, JsonObjectFormat):
        return ResponseFormat(type="json_object")
    if isinstance(given, JsonSchemaFormat):
        spec = given.json_schema
        return ResponseFormat(
            type="json_schema",
            name=spec.name,
            description=spec.description,
            json_schema=spec.schema_,
            strict=spec.strict,
        )
    return None


class StreamOptions(OpenAIBody):
    include_usage: bool = False


class ChatCompletionRequest(OpenAIRequest):
    DESCRIPTIVE = frozenset(
        {"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"}
    )
    OFF = PENALTIES_OFF | {
        "modalities": (None, ["text"]),
        "audio": (None,),
        "prediction": (None,),
        "web_search_options": (None,),
        "reasoning_effort": (None,),
        "verbosity": (None,),
        "functions": (None, []),
        "function_call": (None, "none"),
    }

    model: str
    messages: list[MessageIn] = Field(min_length=1)
    tools: list[ToolIn] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: (
        Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")]
        | None
    ) = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=INT64)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=INT64)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=-INT64 - 1, le=INT64)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("only n=1 is supported: send one request per choice")
        return n

    @model_validator(mode="after")
    def _tool_choice_names_a_tool(self) -> "ChatCompletionRequest":
        choice = self.tool_choice
        names = [tool.function.name for tool in self.tools or []]
        if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
            raise PydanticCustomError(
                "unknown_tool",
                # Pydantic fills {name} with str.format's plain field: no !r conversion.
                "tool_choice names the function '{name}', which is not among the tools ({tools})",
                {"name": choice.function.name, "tools": ", ".join(names) or "none given"},
            )
        if (choice == "required" or isinstance(choice, NamedToolChoice)) and not names:
            raise PydanticCustomError(
                "no_tools", "tool_choice is only allowed when tools are specified", {}
            )
        return self

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs_need_logprobs(cls, top: int | None, info: ValidationInfo) -> int | None:
        if top and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs set to true")
        return top

    def to_generation(self, default_temperature: float | None) -> GenerationRequest:
        """`default_temperature` stands in for a temperature the client left out (None: the
        engine's upstream applies its own)."""
        stop = [self.stop] if isinstance(self.stop, str) else self.stop or []
        choice = self.tool_choice
        return GenerationRequest(
            messages=[m.to_message() for m in self.messages],
            tools=[
                ToolSpec(
                    name=t.function.name,
                    description=t.function.description,
                    parameters=t.function.parameters,
                )
                for t in self.tools or []
            ],
            tool_choice=choice.function.name if isinstance(choice, NamedToolChoice) else choice,
            parallel_tool_calls=self.parallel_tool_calls,
            response_format=response_format(self.response_format),
            sampling=SamplingParams(
                temperature=default_temperature if self.temperature is None else self.temperature,
                top_p=self.top_p,
                max_tokens=self.max_completion_tokens or self.max_tokens,
                stop=stop,
                seed=self.seed,
            ),
            # Token ids name the tokens of a backend that does not say their text.
            capture=Capture(
                logprobs=self.logprobs, token_ids=self.logprobs, top_logprobs=self.top_logprobs or 0
            ),
            model=self.model,
        )


# --------------------------------------------------------------------------- endpoints


@router.get("/v1/models")
async def list_models(state: State) -> JSONResponse:
    try:
        served = await state.models()
    except EngineError as exc:
        raise engine_error(exc) from None
    data = []
    for info in served:
        entry: dict[str, Any] = {
            "id": info.id,
            "object": "model",
            "created": 0,
            "owned_by": info.owned_by or "opencomposer",
        }
        if info.context_window is not None:
            # `max_model_len` too: vLLM's name, which OpenAI-compatible clients already read.
            entry |= {"context_window": info.context_window, "max_model_len": info.context_window}
        data.append(entry)
    # The agent answers chat completions as a model does, so clients that pick from this list
    # can find it (it has no window of its own: it summarizes its thread as it fills).
    data.append({"id": AGENT_MODEL, "object": "model", "created": 0, "owned_by": "opencomposer"})
    return JSONResponse({"object": "list", "data": data})


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, state: State, request: Request) -> Response:
    if body.model == AGENT_MODEL:
        if response_format(body.response_format) is not None:
            raise OpenAIError(
                400,
                f"response_format is not supported with {AGENT_MODEL}: the agent answers in "
                "its own words; ask a served model for JSON",
                param="response_format",
            )
        engine: Engine = await _agent_engine(state, request.headers.get(THREAD_HEADER))
        model = AGENT_MODEL
    else:
        engine = state.engine
        model = await resolve_model(state, body.model)
        param = "max_completion_tokens" if body.max_completion_tokens else "max_tokens"
        await check_max_tokens(state, model, body.max_completion_tokens or body.max_tokens, param)
    try:
        generation = body.to_generation(default_temperature(state))
    except ValidationError as exc:
        raise validation_error(exc) from None
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    return await respond(
        engine,
        generation,
        ChatReply(
            model=model,
            top_logprobs=(body.top_logprobs or 0) if body.logprobs else None,
            one_call=body.parallel_tool_calls is False,
        ),
        stream=body.stream,
        include_usage=include_usage,
        request=request,
    )


# The status nobody reads: the client of a whole reply went away before it was ready (nginx's
# "client closed request").
CLIENT_GONE = 499


async def respond(
    engine: Engine,
    generation: GenerationRequest,
    reply: "Reply",
    *,
    stream: bool,
    include_usage: bool,
    request: Request,
) -> Response:
    """The engine's answer as one JSON object, or as server-sent chunks ending in `[DONE]`.
    Either way, a client that goes away cancels the generation: Starlette cancels a stream
    whose client left; a whole reply is raced against the client's hanging up here."""
    # A client that waits for the whole answer lets the engine ask for it whole too.
    generation = generation.model_copy(update={"stream": stream})
    if not stream:
        completion = asyncio.ensure_future(_complete(engine, generation, reply))
        hung_up = asyncio.ensure_future(_hung_up(request))
        try:
            await asyncio.wait({completion, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hung_up.cancel()
            completion.cancel()  # closing its engine stream aborts the generation
        if not completion.done() or completion.cancelled():
            return Response(status_code=CLIENT_GONE)
        return JSONResponse(completion.result())
    events = engine.generate(generation)
    # The first event is awaited here so that a request the engine refuses at once still gets
    # a proper status instead of a 200 followed by an error event.
    try:
        first = await anext(events)
    except EngineError as exc:
        await events.aclose()
        raise engine_error(exc) from None
    except StopAsyncIteration:
        raise engine_error(
            EngineProtocolError("the engine's stream ended without a result")
        ) from None
    return StreamingResponse(
        _sse(events, first, reply, include_usage),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _agent_engine(state: ServerState, thread_id: str | None) -> Engine:
    """The thread a chat with the agent runs in (it must exist and have no turn running)."""
    if not thread_id:
        raise OpenAIError(
            400,
            f"chatting with {AGENT_MODEL} needs an X-Opencomposer-Thread "
            "header naming a thread (create one with POST /v1/threads)",
            param="model",
            code="thread_required",
        )
    try:
        session = await state.runtime.open_thread(thread_id)
    except SessionError as exc:
        raise OpenAIError(404, exc.message, code="thread_not_found") from None
    if session.running is not None:
        raise OpenAIError(409, f"thread {thread_id} has a turn running", code="turn_running")
    api = AgentAPI(state.runtime, lambda: state.runtime.settings.server.workspace_roots)
    return AgentChatEngine(api, thread_id)


def default_temperature(state: ServerState) -> float | None:
    """OpenAI's default for a request without a temperature, unless an upstream has its own."""
    return None if state.forwards_requests else OPENAI_DEFAULT_TEMPERATURE


async def resolve_model(state: ServerState, requested: str | None) -> str:
    """The model id to answer with. A requested one must be served (404 otherwise), except
    by an OpenAI-compatible upstream: many serve their one model under any name (llama.cpp
    lists it by file path), so the name goes to the upstream, which refuses it if it must."""
    try:
        served = [info.id for info in await state.models()]
    except EngineError as exc:
        raise engine_error(exc) from None
    if requested is None:
        return served[0] if served else "unknown"
    if requested not in served and not state.forwards_requests:
        raise OpenAIError(
            404,
            f"the model {requested!r} does not exist; served: {', '.join(served)}",
            param="model",
            code="model_not_found",
        )
    return requested


async def check_max_tokens(
    state: ServerState, model: str, requested: int | None, param: str
) -> None:
    """A completion longer than the model's whole window is a 400, as at OpenAI: accepted, it
    could never be honoured, and the client learns so only from a cut answer."""
    if requested is None:
        return
    try:
        windows = {info.id: info.context_window for info in await state.models()}
    except EngineError as exc:
        raise engine_error(exc) from None
    window = windows.get(model)
    if window is not None and requested > window:
        raise OpenAIError(
            400,
            f"{param} is too large: {requested:,}. The model {model!r} has a window of "
            f"{window:,} tokens, the prompt included",
            param=param,
            code="invalid_value",
        )


async def _hung_up(request: Request) -> None:
    """Returns once the client has closed its connection (the body is read: what comes next
    from the server is only ever the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _complete(
    engine: Engine, generation: GenerationRequest, reply: "Reply"
) -> dict[str, Any]:
    try:
        async with aclosing(engine.generate(generation)) as stream:
            async for event in stream:
                if isinstance(event, Finished):
                    return reply.completion(event.result)
    except EngineError as exc:
        raise engine_error(exc) from None
    raise engine_error(EngineProtocolError("the engine's stream ended without a result"))


async def _sse(
    stream: AsyncGenerator[EngineEvent, None],
    first: EngineEvent,
    reply: "Reply",
    include_usage: bool,
) -> AsyncIterator[str]:
    """The chunks of one streamed completion. Closing the engine stream on the way out (the
    client went away, so Starlette cancels this generator) cancels the generation."""
    async with aclosing(stream):
        for chunk in reply.opening():
            yield _data(chunk)
        event: EngineEvent | None = first
        try:
            while event is not None:
                for chunk in reply.chunks(event, include_usage):
                    yield _data(chunk)
                event = await anext(stream, None)
        except EngineError as exc:
            # The status line is gone: the error travels as the stream's last event.
            yield _data(engine_error(exc).body)
        yield "data: [DONE]\n\n"


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


# --------------------------------------------------------------------------- response shape


class Reply(Protocol):
    """Builds the response objects of one completion (chat or text)."""

    def completion(self, result: GenerationResult) -> dict[str, Any]:
        """The whole answer, for a request that did not stream."""
        ...

    def opening(self) -> list[dict[str, Any]]:
        """Chunks sent before the first event."""
        ...

    def chunks(self, event: EngineEvent, include_usage: bool) -> list[dict[str, Any]]:
        """The chunks one engine event becomes."""
        ...


class Envelope:
    """What the response objects of one completion share: an id, a time and a model."""

    def __init__(self, *, prefix: str, model: str) -> None:
        self.id = f"{prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def _envelope(self, kind: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }


class ChatReply(Envelope):
    def __init__(self, *, model: str, top_logprobs: int | None, one_call: bool = False) -> None:
        """`top_logprobs`: alternatives per token; None when logprobs were not asked for.
        `one_call`: `parallel_tool_calls` is false, so at most the first call reaches the
        client, whichever backend printed more (an upstream may not honour the flag)."""
        super().__init__(prefix="chatcmpl", model=model)
        self.top_logprobs = top_logprobs
        self._one_call = one_call
        self._streamed_logprobs = StreamedLogprobs()
        self._space = ""
        """Whitespace-only text held back: sent with the text that follows it, dropped where
        a tool call does (the line breaks a model prints between its calls are no content)."""

        self._called = False

    def opening(self) -> list[dict[str, Any]]:
        return [self.chunk({"role": "assistant", "content": ""})]

    def completion(self, result: GenerationResult) -> dict[str, Any]:
        # `refusal` is always there in OpenAI's message (null: no refusal, as here).
        result = self._allowed(result)
        text = result.text if result.text.strip() or not result.tool_calls else ""
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if result.reasoning:  # the field vLLM, SGLang and DeepSeek use for thinking
            message["reasoning_content"] = result.reasoning
        if result.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in result.tool_calls]
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": result.finish_reason,
            "logprobs": self._logprobs(sampled_tokens(result.tokens)),
        }
        return self._envelope("chat.completion", [choice]) | usage_field(result)

    def chunk(
        self,
        delta: dict[str, Any],
        finish_reason: str | None = None,
        logprobs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": logprobs}
        return self._envelope("chat.completion.chunk", [choice])

    def chunks(self, event: EngineEvent, include_usage: bool) -> list[dict[str, Any]]:
        """The chunks one engine event becomes. Each carries the logprobs of the tokens sampled
        since the last one (reasoning and tool-call tokens included, as in a whole reply)."""
        match event:
            case TokensSampled(tokens):
                self._streamed_logprobs.add(tokens)
                return []
            case TextDelta(text):
                if not text.strip():
                    self._space += text  # its tokens' logprobs go with the next chunk
                    return []
                delta: dict[str, Any] = {"content": self._space + text}
                self._space = ""
            case ReasoningDelta(text):
                delta = {"reasoning_content": text}
            case ToolCallStarted(index, _, _) | ToolCallArgumentsDelta(index, _) if (
                self._one_call and index > 0
            ):
                return []  # its tokens' logprobs go with the finishing chunk
            case ToolCallStarted(index, call_id, name):
                self._space, self._called = "", True
                call = {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                delta = {"tool_calls": [call]}
            case ToolCallArgumentsDelta(index, text):
                delta = {"tool_calls": [{"index": index, "function": {"arguments": text}}]}
            case Finished(result):
                result = self._allowed(result)
                chunks = []
                if self._space and not self._called:  # an answer of whitespace alone
                    chunks.append(self.chunk({"content": self._space}))
                logprobs = self._logprobs(self._streamed_logprobs.at_finish(result.tokens))
                chunks.append(self.chunk({}, result.finish_reason, logprobs))
                if include_usage:
                    chunks.append(
                        self._envelope("chat.completion.chunk", []) | {"usage": usage_json(result)}
                    )
                return chunks
            case _:
                return []
        return [self.chunk(delta, logprobs=self._logprobs(self._streamed_logprobs.take()))]

    def _logprobs(self, tokens: list[SampledToken] | None) -> dict[str, Any] | None:
        return None if self.top_logprobs is None else chat_logprobs(tokens, self.top_logprobs)

    def _allowed(self, result: GenerationResult) -> GenerationResult:
        if self._one_call and len(result.tool_calls) > 1:
            return dataclasses.replace(result, tool_calls=result.tool_calls[:1])
        return result


def usage_field(result: GenerationResult) -> dict[str, Any]:
    """A whole completion's `usage`, left out when the engine counted nothing (an upstream
    that reports none): OpenAI's schema has it an object there, never null. A stream's usage
    chunk keeps the null, which the chunk's schema allows."""
    usage = usage_json(result)
    return {} if usage is None else {"usage": usage}


def usage_json(result: GenerationResult) -> dict[str, Any] | None:
    if result.usage is None:
        return None
    usage = result.usage
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }
