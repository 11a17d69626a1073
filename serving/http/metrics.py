"""`/metrics`: what the server is doing, in the Prometheus exposition format; and request ids,
on every response and every log record written while handling it.

Each app has its own registry (no global state: tests and several servers in one process stay
apart). Requests are counted and timed by route template, not raw path, so thread ids do not
explode the label space. Model work is counted by wrapping the engine that both the model
endpoints and the agent runtime use: tokens in and out, and speculative-decoding drafts and
acceptances, as each generation finishes.
"""

import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from opencomposer.logs import LOGGER_NAME
from opencomposer.serving.engines.base import (
    Engine,
    EngineEvent,
    Finished,
    GenerationRequest,
    ModelInfo,
    Weights,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A client's own request id is kept when it is short and plain; anything else is replaced.
_SANE_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# Methods counted by name; any other (a client may send any token) is counted as "other", so
# no client can grow the label space without bound.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
log = logging.getLogger(__name__)


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "opencomposer_http_requests",
            "HTTP requests served.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "opencomposer_http_request_seconds",
            "Time to the end of the response (whole SSE streams included).",
            ["route"],
            registry=self.registry,
        )
        self.tokens = Counter(
            "opencomposer_model_tokens",
            "Tokens the engine read or wrote.",
            ["kind"],
            registry=self.registry,
        )
        self.generations = Counter(
            "opencomposer_model_generations",
            "Generations by how they finished.",
            ["finish_reason"],
            registry=self.registry,
        )
        self.drafted = Counter(
            "opencomposer_spec_drafted_tokens",
            "Speculative draft tokens proposed.",
            registry=self.registry,
        )
        self.accepted = Counter(
            "opencomposer_spec_accepted_tokens",
            "Speculative draft tokens accepted.",
            registry=self.registry,
        )
        self.verify_steps = Counter(
            "opencomposer_spec_verify_steps",
            "Target forwards that verified drafts.",
            registry=self.registry,
        )
        self.active_turns = Gauge(
            "opencomposer_agent_active_turns", "Agent turns running now.", registry=self.registry
        )

    def watch_turns(self, count: Callable[[], int]) -> None:
        self.active_turns.set_function(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MeteredEngine:
    """An engine that counts what the engine it wraps produces."""

    def __init__(self, engine: Engine, metrics: ServerMetrics) -> None:
        self.inner = engine
        self.metrics = metrics

    async def models(self) -> list[ModelInfo]:
        return await self.inner.models()

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        stream = self.inner.generate(request)
        try:
            async for event in stream:
                if isinstance(event, Finished):
                    self._count(event)
                yield event
        finally:
            await stream.aclose()

    def _count(self, event: Finished) -> None:
        result, metrics = event.result, self.metrics
        metrics.generations.labels(result.finish_reason).inc()
        if result.usage is not None:
            metrics.tokens.labels("prompt").inc(result.usage.prompt_tokens)
            metrics.tokens.labels("completion").inc(result.usage.completion_tokens)
        spec = result.spec
        if spec is not None and spec.verify_steps:
            # accept_length = (verify steps + accepted drafts) / verify steps
            accepted = round(spec.accept_length * spec.verify_steps) - spec.verify_steps
            metrics.verify_steps.inc(spec.verify_steps)
            metrics.accepted.inc(max(accepted, 0))
            if spec.drafted is not None:
                metrics.drafted.inc(spec.drafted)

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        await self.inner.update_weights(weights, version, delta=delta)

    async def aclose(self) -> None:
        await self.inner.aclose()


REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
"""The id of the request being handled, for every log record written while handling it."""


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to records logged while a request is handled."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = REQUEST_ID.get()
        if request_id is not None and not hasattr(record, "request_id"):
            record.request_id = request_id
        return True


def tag_logs_with_request_ids() -> None:
    """Install the filter on the project's log handlers (once)."""
    for handler in logging.getLogger(LOGGER_NAME).handlers:
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())


class RequestMetrics:
    """ASGI middleware: give every request an id (the client's `X-Request-Id` when it sends a
    sane one), count and time it by route template, and log one line for it."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500
        given = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _SANE_ID.fullmatch(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        (b"x-request-id", request_id.encode()),
                    ],
                }
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            seconds = time.perf_counter() - started
            method = scope["method"] if scope["method"] in _METHODS else "other"
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(route).observe(seconds)
            log.info(
                "%s %s %s", method, route, status, extra={"duration_ms": round(seconds * 1000, 1)}
            )
            REQUEST_ID.reset(token)
