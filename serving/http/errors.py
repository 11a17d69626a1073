"""Errors per API: each router reports failures in its own clients' shape (OpenAI's for the
model endpoints, the protocol's for the agent API) without app-wide handlers, so one router's
convention never leaks into another's."""

from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import ValidationError

Translate = Callable[[Exception], Response | None]
"""An exception -> the response to send, or None to let it propagate."""


def translating_route(translate: Translate) -> type[APIRoute]:
    """A route class whose handlers turn the exceptions `translate` knows into responses."""

    class TranslatingRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
            handler = super().get_route_handler()

            async def handle(request: Request) -> Response:
                try:
                    return await handler(request)
                except Exception as exc:
                    response = translate(exc)
                    if response is None:
                        raise
                    return response

            return handle

    return TranslatingRoute


def validation_problems(exc: RequestValidationError | ValidationError) -> list[tuple[str, str]]:
    """(where, what) of each invalid field; `where` is the dotted path inside the body."""
    return [(".".join(str(part) for part in error.get("loc", ()) if part != "body"),
             error.get("msg", "invalid")) for error in exc.errors()]


def describe(problems: list[tuple[str, str]]) -> str:
    """The problems in one line a person can act on."""
    return "; ".join(f"{where}: {what}" if where else what for where, what in problems) \
        or "invalid request"
