"""Errors per API: each router reports failures in its own clients' shape (OpenAI's for the
model endpoints, the protocol's for the agent API) without app-wide handlers, so one router's
convention never leaks into another's. Refusals made before routing (Host, Origin, token,
content type, body size) pick the same shape from the path. A full data folder, wherever a
route meets it, is 507 Insufficient Storage naming the folder, in the route's shape."""

import json
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import pydantic_core
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.types import Send

from opencomposer.data_folder import DataFolderFull

Translate = Callable[[Exception], Response | None]
"""An exception -> the response to send, or None to let it propagate."""

INSUFFICIENT_STORAGE = 507
"""The status of a request the data folder had no room for (RFC 4918)."""

AGENT_PREFIXES = ("/v1/threads", "/v1/traces", "/v1/protocol", "/v1/doctor")
"""The agent API's routes: their errors have the protocol's shape. Everything else under
`/v1/` is OpenAI's namespace (the model routes, and any path an OpenAI client may try), whose
errors have OpenAI's shape, which the SDKs read."""


def openai_path(path: str) -> bool:
    return path.startswith("/v1/") and not any(
        path == prefix or path.startswith(prefix + "/") for prefix in AGENT_PREFIXES
    )


def error_body(path: str, kind: str, message: str) -> dict:
    """An error in the shape the clients of `path` read."""
    if openai_path(path):
        return {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": kind,
            }
        }
    return {"error": {"kind": kind, "message": message}}


async def send_refusal(
    send: Send,
    path: str,
    status: int,
    kind: str,
    message: str,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """Answer from an ASGI middleware, before any route runs."""
    body = json.dumps(error_body(path, kind, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # The body echoes the refused Host or Origin: never as HTML.
                (b"x-content-type-options", b"nosniff"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class StrictJSONRequest(Request):
    """A request whose JSON body is parsed strictly: a lone surrogate (`"\\udc80"`: no UTF-8
    text holds one, so SQLite and every response encoder fail on it), `NaN` and `Infinity`
    are malformed JSON like any other, refused with a 400 in the route's shape."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = pydantic_core.from_json(body, allow_inf_nan=False)
            except ValueError as exc:
                # The exception FastAPI turns into its "invalid JSON" validation error.
                raise json.JSONDecodeError(str(exc), body.decode("utf-8", "replace"), 0) from None
        return self._json


def translating_route(translate: Translate) -> type[APIRoute]:
    """A route class whose handlers parse JSON strictly and turn the exceptions `translate`
    knows into responses."""

    class TranslatingRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def handle(request: Request) -> Response:
                try:
                    return await handler(StrictJSONRequest(request.scope, request.receive))
                except Exception as exc:
                    response = translate(exc)
                    if response is not None:
                        return response
                    if isinstance(exc, DataFolderFull):
                        body = error_body(request.url.path, exc.kind, exc.message)
                        return JSONResponse(body, status_code=INSUFFICIENT_STORAGE)
                    raise

            return handle

    return TranslatingRoute


def validation_problems(exc: RequestValidationError | ValidationError) -> list[tuple[str, str]]:
    """(where, what) of each invalid field; `where` is the dotted path inside the body, empty
    for a body that is not JSON at all."""
    return [
        ("", f"the body is not valid JSON ({error.get('ctx', {}).get('error', '?')})")
        if error.get("type") == "json_invalid"
        else (
            ".".join(str(part) for part in error.get("loc", ()) if part != "body"),
            error.get("msg", "invalid"),
        )
        for error in exc.errors()
    ]


def describe(problems: list[tuple[str, str]]) -> str:
    """The problems in one line a person can act on."""
    return (
        "; ".join(f"{where}: {what}" if where else what for where, what in problems)
        or "invalid request"
    )
