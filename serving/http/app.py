"""The HTTP application: the model, OpenAI-compatible (`model_api`), and the agent as threads,
turns and items over SSE (`agent_api`), on one FastAPI app with one engine and one agent
runtime (`state`); plus health, the protocol's JSON Schema and the doctor report. `/` is the
trace viewer (`static/`: threads, their turns and items, live turns), whose footer lists what
is served, so a user who opens the URL is never left guessing.

Every request passes the front door first, outermost to innermost: the Host and Origin checks
(`origin`), the bearer token (`auth`; all but the page, its assets and the health probes),
JSON bodies only (`content_type`) and the body's size and time limits (`limits`). Below them
all, each connection has deadlines and a place under the connection cap (`connections`),
which `ConnectionUse` keeps informed of the requests it carries.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from html import escape
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import SecretStr
from starlette.exceptions import HTTPException as StarletteHTTPException

import opencomposer
from opencomposer.agent.protocol.schema import protocol_schema
from opencomposer.config import LoadedSettings
from opencomposer.serving.doctor import run_doctor
from opencomposer.serving.engines.base import Engine
from opencomposer.serving.http import agent_api, completions_api, model_api
from opencomposer.serving.http.auth import RequireToken
from opencomposer.serving.http.connections import ConnectionUse
from opencomposer.serving.http.content_type import JsonBodies
from opencomposer.serving.http.errors import error_body
from opencomposer.serving.http.limits import BodyLimit
from opencomposer.serving.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from opencomposer.serving.http.metrics import (
    MeteredEngine,
    RequestMetrics,
    ServerMetrics,
    tag_logs_with_request_ids,
)
from opencomposer.serving.http.origin import BrowserGuard, HostPolicy
from opencomposer.serving.http.state import ServerState

ENDPOINTS = {
    "/healthz": "liveness",
    "/readyz": "readiness: the engine can serve its model",
    "/metrics": "Prometheus metrics: requests, latencies, tokens, turns, speculation",
    "/v1/models": "the served models and opencomposer-agent (OpenAI-compatible)",
    "/v1/chat/completions": "chat with a model or the agent (OpenAI-compatible; POST)",
    "/v1/completions": "text and fill-in-the-middle completions (OpenAI-compatible; POST)",
    "/v1/threads": "the agent: threads, turns streamed over SSE, approvals",
    "/v1/traces/export": "threads as JSONL training data",
    "/v1/protocol/schema": "JSON Schema of the agent protocol",
    "/v1/doctor": "what works on this server's machine",
}


STATIC = Path(__file__).parent / "static"
"""The web page's files, shipped as package data."""

STATIC_TYPES = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
"""The files under `/static/` and their types; nothing else there is served."""

PUBLIC_PATHS = frozenset(
    {"/", "/healthz", "/readyz", *(f"/static/{name}" for name in STATIC_TYPES)}
)
"""What is served without the token: the page and its assets (they hold no data, and a browser
cannot send a token to load a page: the page asks for it) and the probes (they say no more
than up or ready). Exact paths, so no prefix trick reaches anything else."""

PAGE_HEADERS = {
    # Only the page's own files run, nothing is framed (clickjacking), and its URL, which
    # carries the token on first load, is never sent on as a Referer.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def index_page() -> str:
    """`static/index.html` with the version and the endpoint list filled in."""
    rows = "".join(
        f'<li><a href="{escape(path)}"><code>{escape(path)}</code></a>: {escape(what)}</li>'
        for path, what in ENDPOINTS.items()
    )
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    return page.replace("{{version}}", escape(opencomposer.__version__)).replace(
        "{{endpoints}}", rows
    )


def create_app(
    loaded: LoadedSettings,
    token: str | None,
    workspace: Path | None = None,
    *,
    engine: Engine | None = None,
) -> FastAPI:
    """Build the app; with a token every route but `PUBLIC_PATHS` requires it (None: no token
    check, for tests; the Host and Origin checks apply always). The engine is the configured
    one unless given (tests pass a scripted engine)."""
    if token == "":
        raise ValueError("an empty token would let any `Authorization: Bearer` in")
    metrics = ServerMetrics()
    settings = loaded.settings
    if token is not None:  # known to the runtime's redactor, even when made, not configured
        settings = settings.model_copy(
            update={"server": settings.server.model_copy(update={"token": SecretStr(token)})}
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from opencomposer.agent.runtime import AgentRuntime
        from opencomposer.serving.engines import make_engine

        serving = MeteredEngine(
            engine or make_engine(settings.engine, settings.models_dir), metrics
        )
        runtime = AgentRuntime(settings, serving)
        metrics.watch_turns(runtime.running_turns)
        app.state.server = ServerState(settings, serving, runtime)
        try:
            yield
        finally:  # running turns end as interrupted, and every event is already stored
            await runtime.close()
            await serving.aclose()

    app = FastAPI(
        lifespan=lifespan,
        title="opencomposer",
        version=opencomposer.__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )

    @app.get("/readyz")
    async def readyz(request: Request) -> JSONResponse:
        """Ready when the engine can serve its model (the embedded one is present, a server
        answers); not guarded, like /healthz, so it says no more than that."""
        from opencomposer.serving.engines.errors import EngineError

        try:
            await request.app.state.server.engine.models()
        except EngineError as exc:
            return JSONResponse({"status": "not_ready", "reason": exc.kind}, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "version": opencomposer.__version__}

    @app.get("/v1/protocol/schema")
    async def schema() -> JSONResponse:
        return JSONResponse(protocol_schema())

    @app.get("/v1/doctor")
    async def doctor() -> JSONResponse:
        report = await run_doctor(workspace, {})
        return JSONResponse(report.to_json())

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        """The trace viewer (`static/`), with the list of what is served in its footer."""
        return HTMLResponse(index_page(), headers=PAGE_HEADERS)

    @app.get("/static/{name}")
    async def static_file(name: str) -> Response:
        if name not in STATIC_TYPES:
            return JSONResponse(
                {"error": {"kind": "not_found", "message": f"no {name}"}}, status_code=404
            )
        return Response((STATIC / name).read_bytes(), media_type=STATIC_TYPES[name])

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=METRICS_CONTENT_TYPE)

    @app.exception_handler(StarletteHTTPException)
    async def routing_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """No such route (404) or method (405): in the shape of the API the path belongs to,
        not FastAPI's `{"detail": ...}` that no client of either reads."""
        path = request.url.path
        kind, message = {
            404: ("not_found", f"no route {request.method} {path}"),
            405: ("method_not_allowed", f"{request.method} is not allowed on {path}"),
        }.get(exc.status_code, ("http_error", str(exc.detail)))
        return JSONResponse(
            error_body(path, kind, message), status_code=exc.status_code, headers=exc.headers
        )

    # The last one added runs first.
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.server.max_body_bytes,
        timeout=settings.server.body_timeout,
    )
    app.add_middleware(JsonBodies)
    if token is not None:
        app.add_middleware(RequireToken, token=token, public=PUBLIC_PATHS)
    app.add_middleware(BrowserGuard, policy=HostPolicy.from_settings(settings.server))
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.add_middleware(ConnectionUse, trust_every_request=token is None)
    tag_logs_with_request_ids()
    app.include_router(model_api.router)
    app.include_router(completions_api.router)
    app.include_router(agent_api.router)
    app.state.settings = loaded
    return app
