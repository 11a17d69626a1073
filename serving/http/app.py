"""The HTTP application.

Serves, for now: health, the agent protocol's JSON Schema and the doctor report. The model
endpoints (`/v1/chat/completions`, ...) and the agent thread API arrive with the engine and
HTTP issues; `/` says what is served so a user who opens the URL is never left guessing.
"""

from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

import opencomposer
from opencomposer.agent.protocol.schema import protocol_schema
from opencomposer.config import LoadedSettings
from opencomposer.serving.doctor import run_doctor
from opencomposer.serving.http.auth import BearerToken

ENDPOINTS = {
    "/healthz": "liveness",
    "/v1/protocol/schema": "JSON Schema of the agent protocol",
    "/v1/doctor": "what works on this server's machine",
}


def create_app(loaded: LoadedSettings, token: str | None, workspace: Path | None = None) -> FastAPI:
    """Build the app; with a token every route except /healthz requires it."""
    guard = [Depends(BearerToken(token))] if token else []
    app = FastAPI(
        title="opencomposer",
        version=opencomposer.__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None if token else "/openapi.json",
    )

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "version": opencomposer.__version__}

    @app.get("/v1/protocol/schema", dependencies=guard)
    async def schema() -> JSONResponse:
        return JSONResponse(protocol_schema())

    @app.get("/v1/doctor", dependencies=guard)
    async def doctor() -> JSONResponse:
        report = await run_doctor(workspace, {})
        return JSONResponse(report.to_json())

    @app.get("/", dependencies=guard, response_class=HTMLResponse)
    async def index() -> str:
        rows = "".join(
            f'<li><a href="{path}"><code>{path}</code></a>: {what}</li>'
            for path, what in ENDPOINTS.items()
        )
        return (
            "<!doctype html><meta charset=utf-8><title>opencomposer</title>"
            f"<h1>opencomposer {opencomposer.__version__}</h1>"
            f"<p>This server provides:</p><ul>{rows}</ul>"
            "<p>Not served yet: the OpenAI-compatible model endpoints and the agent thread "
            "API over SSE.</p>"
        )

    app.state.settings = loaded
    return app
