"""The `openai` backend: any OpenAI-compatible server (SGLang, vLLM, llama.cpp, hosted APIs)
through the official `openai` async client.

A request streams (`stream_options.include_usage`) when its caller streams, so a hung server
shows up as silence past `idle_timeout` instead of an endless wait; a caller that waits for
the whole answer gets a non-streamed request, which every server answers with usage. Some
servers cannot stream a tool call (llama-cpp-python answers an empty 200): a streamed
request with tools that comes back empty is asked again without streaming, and so is every
later one with tools. Server-specific training extras are asked for only when
`server_flavor` says the server understands them; standard servers reject unknown fields.
Tool calls printed as text are recovered by `tool_text` unless disabled. Nothing the caller
did not ask for is sent: a server's own defaults stay its own.
"""

import json
import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

import openai

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    EngineEvent,
    Finished,
    GenerationRequest,
    ModelInfo,
    Weights,
)
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineAuthError,
    EngineError,
    EngineProtocolError,
    EngineRateLimited,
    EngineRequestError,
    EngineServerError,
    EngineStreamInterrupted,
    EngineTimeout,
    EngineUnavailable,
    ModelNotFound,
)
from opencomposer.serving.engines.overflow import near_window, says_overflow
from opencomposer.serving.engines.stream_assembly import ChatStreamAssembler
from opencomposer.serving.engines.tool_text import FORMATS, ToolTextParser
from opencomposer.serving.engines.upstream_window import PropsWindow
from opencomposer.serving.engines.whole_reply import as_chunk

log = logging.getLogger(__name__)


class _NothingStreamed(EngineStreamInterrupted):
    """The server answered a streamed request with a stream that held no chunk at all."""


class _Unanswered(EngineUnavailable):
    """A request the server took and dropped without a response (not one it never got)."""


_NOT_CONNECTED = frozenset({"ConnectError", "ConnectTimeout"})


def _reached_the_server(exc: openai.APIConnectionError) -> bool:
    """Whether the request got through before the connection failed: not a refused or
    unreachable connection, not a timeout, but a hang-up after it was sent. The SDK's
    transport is its own copy of httpx (`httpx2` in openai 3.x), so its exceptions are told
    by their class names."""
    cause = exc.__cause__
    if isinstance(exc, openai.APITimeoutError) or cause is None:
        return False
    return not any(klass.__name__ in _NOT_CONNECTED for klass in type(cause).__mro__)


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class OpenAIEngine:
    """Engine over an OpenAI-compatible HTTP server."""

    def __init__(
        self, settings: EngineSettings, *, new_call_id: Callable[[], str] = new_call_id
    ) -> None:
        self._settings = settings
        self._new_call_id = new_call_id
        self._model: str | None = settings.model
        self._tools_unstreamed = False
        """Set once this server answered a streamed request with tools with nothing."""

        self._windows: dict[str, int | None] = {}
        """Context window of each model listed (aliases included), from `models()`."""

        api_key = settings.api_key.get_secret_value() if settings.api_key else "unused"
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=api_key,
            max_retries=settings.max_retries,
            timeout=openai.Timeout(
                connect=settings.connect_timeout,
                read=settings.idle_timeout,
                write=settings.idle_timeout,
                pool=settings.connect_timeout,
            ),
        )
        self._props = PropsWindow(self._client, settings.base_url)

    async def models(self) -> list[ModelInfo]:
        """The server's models, each with its window where the server says it (or
        `engine.context_window`), then the configured aliases with their target's."""
        try:
            page = await self._client.models.list()
        except openai.APIError as exc:
            raise self._error(exc) from None
        listed = []
        for m in page.data:
            # vLLM and SGLang report the window as an extra field.
            window = getattr(m, "max_model_len", None)
            if not isinstance(window, int):
                window = await self._unlisted_window()
            listed.append(ModelInfo(m.id, window, getattr(m, "owned_by", None)))
        by_id = {info.id: info for info in listed}
        for alias, target in self._settings.model_aliases.items():
            known = by_id.get(target)
            listed.append(
                ModelInfo(
                    alias,
                    known.context_window if known else self._settings.context_window,
                    known.owned_by if known else None,
                )
            )
        self._windows = {info.id: info.context_window for info in listed}
        return listed

    async def _unlisted_window(self) -> int | None:
        """llama.cpp's `/props` window, else the configured one."""
        return await self._props.get() or self._settings.context_window

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        model = await self._resolve_model(request)
        try:
            if request.stream and not (request.tools and self._tools_unstreamed):
                try:
                    async for event in self._streamed(request, model):
                        yield event
                    return
                except _NothingStreamed:
                    if not request.tools:
                        raise
                    log.info(
                        "the server streamed nothing for a request with tools; asking without "
                        "streaming, as from now on for every request with tools",
                        extra={"base_url": self._settings.base_url},
                    )
                try:
                    events = await self._whole(request, model)
                except _Unanswered:
                    # The broken stream's connection, handed back by the pool already closed
                    # by the server (llama-cpp-python drops it): once more, on a fresh one.
                    events = await self._whole(request, model)
                self._tools_unstreamed = True
            else:
                events = await self._whole(request, model)
        except EngineStreamInterrupted as exc:
            window = await self._window(model)
            if near_window(request, window):
                raise ContextLengthExceeded(
                    f"{exc.message}, with a prompt near the model's window of {window} tokens: "
                    "taken to be too long"
                ) from None
            raise
        for event in events:
            yield event

    async def _whole(self, request: GenerationRequest, model: str) -> list[EngineEvent]:
        """The events of one non-streamed request, all at once."""
        reply = await self._create(request, self._body(request, model, stream=False))
        assembler = self._assembler(request)
        events = assembler.feed(as_chunk(reply.to_dict(warnings=False)))
        tail, result = assembler.finish()
        return [*events, *tail, Finished(result)]

    async def _streamed(
        self, request: GenerationRequest, model: str
    ) -> AsyncGenerator[EngineEvent, None]:
        try:
            stream = await self._create(request, self._body(request, model, stream=True))
        except _Unanswered as exc:
            if not request.tools:
                raise
            # The server took the request and hung up without a word: llama-cpp-python does
            # so when a streamed request's model picks a tool (it cannot stream that choice).
            raise _NothingStreamed(str(exc)) from None
        assembler = self._assembler(request)
        chunks = 0
        try:
            async for chunk in stream:
                chunks += 1
                for event in assembler.feed(chunk.to_dict(warnings=False)):
                    yield event
            events, result = assembler.finish()
        except openai.APIConnectionError as exc:
            raise self._broken(exc, chunks) from None
        except EngineStreamInterrupted:
            if chunks == 0:
                raise self._broken(None, chunks) from None
            raise
        except json.JSONDecodeError as exc:
            raise EngineProtocolError(f"the server sent a chunk that is not JSON: {exc}") from None
        except openai.APIError as exc:
            raise self._error(exc) from None
        finally:
            await stream.close()
        for event in events:
            yield event
        yield Finished(result)

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        raise EngineRequestError(
            "an OpenAI-compatible server takes no weights over its API: restart it on the new "
            "checkpoint (or serve with the embedded engine)"
        )

    async def aclose(self) -> None:
        await self._client.close()

    # ------------------------------------------------------------------ helpers

    async def _resolve_model(self, request: GenerationRequest) -> str:
        """The id to send: the request's model or the configured one (the first listed when
        neither says), through `engine.model_aliases`."""
        model = request.model or self._model
        if model is None:
            listed = await self.models()
            if not listed:
                raise EngineUnavailable(f"the server at {self._settings.base_url} lists no models")
            model = self._model = listed[0].id
        return self._settings.model_aliases.get(model, model)

    async def _window(self, model: str) -> int | None:
        """The window of the model requested, from the listing (asked once if need be)."""
        if model not in self._windows:
            try:
                await self.models()
            except EngineError:
                return self._settings.context_window
        return self._windows.get(model) or self._settings.context_window

    async def _create(self, request: GenerationRequest, body: dict[str, Any]) -> Any:
        """Send the request (chat, or text for a prompt): the reply, or the open stream."""
        try:
            if request.prompt is None:
                return await self._client.chat.completions.create(**body)
            return await self._client.completions.create(**body)
        except openai.APIConnectionError as exc:
            if _reached_the_server(exc):
                raise _Unanswered(
                    f"the server at {self._settings.base_url} closed the connection without "
                    f"answering: {_cause(exc)}"
                ) from None
            raise self._error(exc) from None
        except openai.APIError as exc:
            raise self._error(exc) from None

    def _assembler(self, request: GenerationRequest) -> ChatStreamAssembler:
        parser = self._text_parser() if request.prompt is None else None
        return ChatStreamAssembler(parser, self._new_call_id)

    def _text_parser(self) -> ToolTextParser | None:
        mode = self._settings.text_tool_calls
        if mode == "off":
            return None
        return ToolTextParser(tuple(FORMATS.values()) if mode == "auto" else (FORMATS[mode],))

    def _body(self, request: GenerationRequest, model: str, *, stream: bool) -> dict[str, Any]:
        sampling = request.sampling
        body: dict[str, Any] = {"model": model}
        if stream:  # not sent otherwise: a request without `stream` is answered whole
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        if request.prompt is not None:
            # `suffix` makes OpenAI-compatible servers (vLLM, SGLang) fill in the middle.
            body["prompt"] = request.prompt.prefix
            if request.prompt.suffix is not None:
                body["suffix"] = request.prompt.suffix
        else:
            body["messages"] = [m.to_openai() for m in request.messages]
        if request.tools:
            body["tools"] = [tool.to_openai() for tool in request.tools]
        choice = request.tool_choice
        if choice is not None:  # only what the caller chose: a default is the upstream's own
            body["tool_choice"] = (
                choice
                if choice in ("auto", "none", "required")
                else {"type": "function", "function": {"name": choice}}
            )
        if request.tools and request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.response_format is not None:
            body["response_format"] = request.response_format.to_openai()
        for name in ("temperature", "top_p", "max_tokens", "seed"):
            value = getattr(sampling, name)
            if value is not None:
                body[name] = value
        if sampling.stop:
            body["stop"] = sampling.stop
        extra: dict[str, Any] = {}
        if sampling.top_k is not None:
            extra["top_k"] = sampling.top_k
        capture = request.capture
        if capture.logprobs and request.prompt is not None:
            body["logprobs"] = capture.top_logprobs  # text completions: how many alternatives
        elif capture.logprobs:
            body["logprobs"] = True
            if capture.top_logprobs:
                body["top_logprobs"] = capture.top_logprobs
        extra.update(self._capture_fields(request))
        if extra:
            body["extra_body"] = extra
        return body

    def _capture_fields(self, request: GenerationRequest) -> dict[str, Any]:
        capture, flavor = request.capture, self._settings.server_flavor
        fields: dict[str, Any] = {}
        if flavor == "sglang":
            if capture.token_ids:
                fields["return_input_ids_in_sglext"] = True
                fields["return_output_ids_in_sglext"] = True
            if capture.routed_experts:
                fields["return_routed_experts"] = True
            if capture.spec_stats:
                fields["return_spec_tokens_details"] = True
        elif flavor == "vllm" and capture.token_ids:
            fields["return_token_ids"] = True
        elif capture.token_ids or capture.routed_experts or capture.spec_stats:
            log.debug(
                "token-level capture needs engine.server_flavor = sglang or vllm",
                extra={"base_url": self._settings.base_url},
            )
        return fields

    def _broken(self, exc: openai.APIConnectionError | None, chunks: int) -> EngineError:
        """What a stream that ended early is: silence past the idle timeout, a stream with
        nothing in it (empty, or broken before its first chunk), or one cut short."""
        where = self._settings.base_url
        if isinstance(exc, openai.APITimeoutError):
            return EngineTimeout(
                f"the server at {where} sent nothing for "
                f"{self._settings.idle_timeout:g}s (engine.idle_timeout)"
            )
        if chunks == 0:
            return _NothingStreamed(f"the server at {where} answered with an empty stream")
        cause = f": {_cause(exc)}" if exc is not None else ""
        return EngineStreamInterrupted(f"the connection to {where} broke mid-stream{cause}")

    def _error(self, exc: openai.APIError) -> EngineError:
        where = self._settings.base_url
        if isinstance(exc, openai.APITimeoutError):
            return EngineTimeout(f"no answer from {where} in time: {_cause(exc)}")
        if isinstance(exc, openai.APIConnectionError):
            return EngineUnavailable(f"cannot reach the model server at {where}: {_cause(exc)}")
        if not isinstance(exc, openai.APIStatusError):  # an error event inside a stream
            if says_overflow(exc.message):  # llama.cpp checks the prompt once it streams
                return ContextLengthExceeded(f"{where}: {exc.message}")
            return EngineServerError(f"{where}: {exc.message}")
        status, message = exc.status_code, _status_message(exc)
        text = f"{where} answered {status}: {message}"
        if status in (401, 403):
            return EngineAuthError(f"{text} (check engine.api_key)")
        if status == 429:
            return EngineRateLimited(text)
        if status >= 500:
            return EngineServerError(text, status)
        code = exc.code if isinstance(exc.code, str) else ""
        if code == "context_length_exceeded" or says_overflow(message):
            return ContextLengthExceeded(text, status)
        if status == 404 and "model" in message.lower():
            return ModelNotFound(f"{text} (check engine.model)", status)
        return EngineRequestError(text, status)


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    return exc.message


def _cause(exc: BaseException) -> str:
    """The innermost error's message: 'Connection refused' rather than 'Connection error.'"""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__
