"""A scripted engine for runtime tests: each request gets the next scripted reply.

Replies say what the model writes (reasoning, text, tool calls), what usage it reports, and
how it misbehaves: fail before or after some output, or hang mid-stream until the consumer
closes the stream (which is recorded, so a test can see that an interrupt closed it).
"""

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from opencomposer.serving.engines.base import (
    EngineEvent,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    TokenTrace,
    ToolCall,
    Usage,
)
from opencomposer.serving.engines.errors import EngineError, EngineRequestError
from opencomposer.serving.engines.replay import stream_events


@dataclass
class Reply:
    text: str = ""
    reasoning: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    """(tool name, arguments): a dict is sent as JSON, a string as is (it may be invalid)."""

    usage: tuple[int, int] | None = None
    """(prompt, completion) tokens to report; by default the prompt's length / 3."""

    reports_usage: bool = True
    """False: the result carries no usage, as from an upstream that sends none."""

    finish_reason: FinishReason | None = None
    """How the engine says the reply ended; by default `tool_calls` or `stop`."""

    error: EngineError | None = None
    fail_after: int | None = None
    """Raise `error` after this many stream events (None: before any)."""

    hang_after: int | None = None
    """Stop sending after this many events and wait until the stream is closed."""

    delay: float = 0.0
    """Seconds between stream events."""


def call(name: str, **arguments: Any) -> tuple[str, Any]:
    return (name, arguments)


@dataclass
class ScriptedEngine:
    replies: list[Reply]
    context_window: int | None = 32_768
    fills_middle: bool | None = None
    """What `models()` says of FIM (None: cannot tell, as a remote backend)."""
    name: str = "scripted"
    requests: list[GenerationRequest] = field(default_factory=list)
    closed_mid_stream: int = 0
    tokens: bool = False
    """Report a token layer: each character of the prompt (messages rendered in order, so a
    longer conversation's prompt begins with a shorter one's) and of the text is a token."""

    _next: int = 0

    async def models(self) -> list[ModelInfo]:
        return [
            ModelInfo(
                id="scripted-model",
                context_window=self.context_window,
                fills_middle=self.fills_middle,
            )
        ]

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        self.requests.append(request)
        if self._next >= len(self.replies):
            raise EngineRequestError(f"the script has only {len(self.replies)} replies")
        reply = self.replies[self._next]
        self._next += 1
        if reply.error is not None and reply.fail_after is None:
            raise reply.error
        step = self._next
        calls = [
            ToolCall(
                id=f"call_{step}_{n}",
                name=name,
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
            for n, (name, args) in enumerate(reply.calls)
        ]
        prompt = request.prompt_chars() // 3
        usage = Usage(*reply.usage) if reply.usage else Usage(prompt, len(reply.text) // 3 + 1)
        result = GenerationResult(
            text=reply.text,
            reasoning=reply.reasoning,
            tool_calls=calls,
            finish_reason=reply.finish_reason or ("tool_calls" if calls else "stop"),
            usage=usage if reply.reports_usage else None,
            model="scripted-model",
            tokens=_character_tokens(request, reply.text) if self.tokens else None,
        )
        try:
            for count, event in enumerate(stream_events(result)):
                if count == reply.fail_after and reply.error is not None:
                    raise reply.error
                if count == reply.hang_after:
                    await asyncio.Event().wait()
                if reply.delay:
                    await asyncio.sleep(reply.delay)
                yield event
        except (GeneratorExit, asyncio.CancelledError):
            self.closed_mid_stream += 1
            raise

    async def aclose(self) -> None:
        return None


def _character_tokens(request: GenerationRequest, text: str) -> TokenTrace:
    rendered = "".join(f"<{m.role}>{m.content or ''}{m.reasoning or ''}" for m in request.messages)
    return TokenTrace(
        prompt_token_ids=[ord(c) for c in rendered],
        completion_token_ids=[ord(c) for c in text],
        logprobs=[-0.5] * len(text),
        weights_version="scripted",
    )
