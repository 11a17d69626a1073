"""Request body size limit, enforced before the body is read into memory.

A declared `Content-Length` over the limit is refused at once; a chunked body is counted as
it arrives and cut off once it passes the limit. Either way the client gets 413 and nothing
of the body reaches a route.
"""

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from opencomposer.serving.http.errors import send_refusal


class BodyLimit:
    """ASGI middleware: at most `max_bytes` of request body per request."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, scope["path"])
            return
        seen = 0
        refused = False

        async def counting_receive() -> Message:
            # Past the limit, answer 413 here and tell the app the client left: the app's
            # own body parsing would otherwise turn any error raised here into a 400.
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    refused = True
                    await self._refuse(send, scope["path"])
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:  # after a 413, whatever the app still says is dropped
                await send(message)

        await self.app(scope, counting_receive, guarded_send)

    async def _refuse(self, send: Send, path: str) -> None:
        await send_refusal(
            send,
            path,
            413,
            "too_large",
            (f"the request body is over the {self.max_bytes:,}-byte limit (server.max_body_bytes)"),
        )
