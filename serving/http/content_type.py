"""Request bodies are JSON and say so.

The bodies a browser sends to another origin without asking it first (a CORS preflight) are
forms, `text/plain`, and bodies with no type at all (a Blob or an ArrayBuffer): refusing
every body not declared as JSON closes that door for good, whatever a route would make of
the bytes. It also tells a curl user, whose `-d` sends a form type, which header to send.
"""

from starlette.types import ASGIApp, Receive, Scope, Send

from opencomposer.serving.http.errors import send_refusal


def is_json(content_type: str) -> bool:
    """`application/json` or an `application/...+json` type, with any parameters."""
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


class JsonBodies:
    """ASGI middleware: a request with a body must declare it JSON, or it gets 415."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope["headers"]
            length = [value.strip() for key, value in headers if key == b"content-length"]
            chunked = any(key == b"transfer-encoding" for key, _ in headers)
            types = [value.decode("latin-1") for key, value in headers if key == b"content-type"]
            if (chunked or any(value != b"0" for value in length)) and not (
                len(types) == 1 and is_json(types[0])
            ):
                sent = (
                    f"it came as {types[0]!r}"
                    if len(types) == 1
                    else ("it came with no Content-Type" if not types else "it came with several")
                )
                await send_refusal(
                    send,
                    scope["path"],
                    415,
                    "unsupported_media_type",
                    (
                        "request bodies must be JSON, sent with the header 'Content-Type: "
                        f"application/json' ({sent})"
                    ),
                )
                return
        await self.app(scope, receive, send)
