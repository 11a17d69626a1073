"""What a request body may cost: bytes and time, enforced as it is read.

Size: a declared `Content-Length` over the limit is refused at once; a chunked body is
counted as it arrives and cut off once it passes the limit (413). Time: the body must come
within `server.body_timeout`, plus one second for every `MIN_BODY_RATE` bytes that came
(Apache's `mod_reqtimeout` rule), or it is cut off (408, and the connection closed): a client
cannot hold a request open by sending its body a byte at a time. Either way nothing of the
body reaches a route. Only the body is timed: once it is whole, the response (a turn's event
stream) takes as long as it takes.
"""

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from opencomposer.serving.http.errors import send_refusal

MIN_BODY_RATE = 500
"""Bytes per second a body must average past `server.body_timeout` (mod_reqtimeout's
default `MinRate`): a 10 MiB body may take 6 hours at that rate; over loopback it takes
milliseconds."""


class BodyLimit:
    """ASGI middleware: at most `max_bytes` of request body per request, within `timeout`
    seconds plus one per `MIN_BODY_RATE` bytes."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send, path)
            return
        seen = 0
        whole = False
        refused = False
        deadline = asyncio.get_running_loop().time() + self.timeout

        async def refuse(status: int, kind: str, message: str) -> Message:
            # Answer here and tell the app the client left: the app's own body parsing
            # would otherwise turn any error raised here into a 400.
            nonlocal refused
            refused = True
            await send_refusal(send, path, status, kind, message, [(b"connection", b"close")])
            return {"type": "http.disconnect"}

        async def limited_receive() -> Message:
            nonlocal seen, whole, deadline
            if whole or refused:  # after the body: a stream's wait for the client to leave
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                return await refuse(
                    408,
                    "timeout",
                    f"the request body did not come in time ({self.timeout:g} s "
                    f"(server.body_timeout) plus 1 s per {MIN_BODY_RATE} bytes)",
                )
            if message["type"] == "http.request":
                chunk = len(message.get("body", b""))
                seen += chunk
                deadline += chunk / MIN_BODY_RATE
                whole = not message.get("more_body", False)
                if seen > self.max_bytes:
                    return await refuse(413, "too_large", self._too_large_message())
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:  # after a refusal, whatever the app still says is dropped
                await send(message)

        await self.app(scope, limited_receive, guarded_send)

    def _too_large_message(self) -> str:
        return f"the request body is over the {self.max_bytes:,}-byte limit (server.max_body_bytes)"

    async def _too_large(self, send: Send, path: str) -> None:
        await send_refusal(send, path, 413, "too_large", self._too_large_message())
