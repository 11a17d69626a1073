"""The `openai` backend: any OpenAI-compatible server (SGLang, vLLM, llama.cpp, hosted APIs)
through the official `openai` async client.

Every request streams (`stream_options.include_usage`), so a hung server shows up as silence
past `idle_timeout` instead of an endless wait. Server-specific training extras are asked
for only when `server_flavor` says the server understands them; standard servers reject
unknown fields. Tool calls printed as text are recovered by `tool_text` unless disabled.
"""

import json
import logging
import re
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
)
from opencomposer.serving.engines.stream_assembly import ChatStreamAssembler
from opencomposer.serving.engines.tool_text import FORMATS, ToolTextParser

log = logging.getLogger(__name__)

# Wordings servers use when a prompt does not fit (OpenAI, vLLM, SGLang, llama.cpp, TGI).
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _]length|context window|maximum context|prompt is too long|too many tokens"
    r"|longer than the model|exceeds? the (?:model'?s )?(?:maximum|max)",
    re.IGNORECASE,
)


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

    async def models(self) -> list[ModelInfo]:
        try:
            page = await self._client.models.list()
        except openai.APIError as exc:
            raise self._error(exc) from None
        return [
            ModelInfo(
                id=m.id,
                # vLLM and SGLang report the window as an extra field.
                context_window=getattr(m, "max_model_len", None),
                owned_by=getattr(m, "owned_by", None),
            )
            for m in page.data
        ]

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        body = self._body(request, await self._resolve_model(request))
        try:
            if request.prompt is None:
                stream = await self._client.chat.completions.create(**body)
            else:
                stream = await self._client.completions.create(**body)
        except openai.APIError as exc:
            raise self._error(exc) from None
        parser = self._text_parser() if request.prompt is None else None
        assembler = ChatStreamAssembler(parser, self._new_call_id)
        try:
            async for chunk in stream:
                for event in assembler.feed(chunk.to_dict(warnings=False)):
                    yield event
            events, result = assembler.finish()
        except openai.APIConnectionError as exc:
            if isinstance(exc, openai.APITimeoutError):
                raise EngineTimeout(
                    f"the server at {self._settings.base_url} sent nothing for "
                    f"{self._settings.idle_timeout:g}s (engine.idle_timeout)"
                ) from None
            raise EngineStreamInterrupted(
                f"the connection to {self._settings.base_url} broke mid-stream: {_cause(exc)}"
            ) from None
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
        if request.model:
            return request.model
        if self._model is None:
            listed = await self.models()
            if not listed:
                raise EngineUnavailable(f"the server at {self._settings.base_url} lists no models")
            self._model = listed[0].id
        return self._model

    def _text_parser(self) -> ToolTextParser | None:
        mode = self._settings.text_tool_calls
        if mode == "off":
            return None
        return ToolTextParser(tuple(FORMATS.values()) if mode == "auto" else (FORMATS[mode],))

    def _body(self, request: GenerationRequest, model: str) -> dict[str, Any]:
        sampling = request.sampling
        body: dict[str, Any] = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
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

    def _error(self, exc: openai.APIError) -> EngineError:
        where = self._settings.base_url
        if isinstance(exc, openai.APITimeoutError):
            return EngineTimeout(f"no answer from {where} in time: {_cause(exc)}")
        if isinstance(exc, openai.APIConnectionError):
            return EngineUnavailable(f"cannot reach the model server at {where}: {_cause(exc)}")
        if not isinstance(exc, openai.APIStatusError):
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
        if code == "context_length_exceeded" or _CONTEXT_OVERFLOW.search(message):
            return ContextLengthExceeded(text, status)
        if status == 404 and "model" in message.lower():
            return EngineRequestError(f"{text} (check engine.model)", status)
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
