"""What one HTTP connection may hold, and for how long: a guard between the socket and uvicorn.

uvicorn (0.55, h11) times a connection out only once it has answered a request: a client that
connects and says nothing, or sends its request head a byte at a time, is kept forever, each
with a file descriptor, and at the process's limit (1,024 by default) accept() fails for every
client, token or not. So each connection runs uvicorn's protocol inside a `GuardedProtocol`,
which gives it deadlines:

- a request head must be complete within `server.header_timeout` of the connection opening,
  or of the first byte of a later request (408, then closed);
- after an answer, the next request must begin within `server.idle_timeout` (closed);
- while the app answers a request there is none: a turn's stream may last an hour (its
  request body has its own deadline, `limits.BodyLimit`).

and `ConnectionGuard` caps the connections open at once (`server.max_connections`, never more
than half the descriptor limit). On loopback every local process has the same address, so
"per client" cannot mean per address: the line is the token. A connection that
has not sent it is a stranger; at the cap, the stranger open longest is closed to make room,
then the authenticated connection idle longest; one that is answering an authenticated
request is never closed for a newcomer (a newcomer finding only those is answered 503). A
flood of strangers thus holds nothing a token holder needs: each new connection pushes out
the oldest of them, and the token holder's is served before it is the oldest.

The app tells a connection what it is doing through `ConnectionUse` and `authenticated()`:
the protocol sets `CURRENT` while uvicorn parses its bytes, so the task uvicorn starts for a
request inherits it (a context variable cannot be forged by a client, unlike the peer address
a proxy header rewrites).
"""

import asyncio
import json
import math
import resource
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from opencomposer.config import ServerSettings
from opencomposer.serving.http.errors import error_body

ACCEPT_BATCH = 64
"""uvicorn's `backlog`: the kernel's queue of connections not yet accepted, and also how many
asyncio accepts in one go before any of them reaches the guard. Descriptors can so run ahead
of the cap by a few batches (accepted, then counted, then the ones shed closed, a loop turn
each); 64 keeps that small. A burst of more clients than this at once waits for its SYN to
be sent again (1 s), it is not refused."""

FD_SHARE = 0.5
"""Share of the descriptor limit connections may take. At the default limit (1,024): 512
connections, up to four accept batches (256) ahead of the cap, and about 250 for the server's
own files (13 measured with one thread open: the trace store and its WAL, the log, the
listener, the workspace; a few more per thread and per command a turn runs)."""


def connection_cap(configured: int) -> int:
    """`server.max_connections`, lowered to what the process's descriptor limit allows."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(1, min(configured, int(soft * FD_SHARE)))


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float
    idle_timeout: float
    max_connections: int

    @classmethod
    def from_settings(cls, server: ServerSettings) -> "ConnectionLimits":
        return cls(
            server.header_timeout, server.idle_timeout, connection_cap(server.max_connections)
        )


def _answer(status: str, kind: str, message: str) -> bytes:
    """A whole HTTP response, written on the socket without the app (which has no request)."""
    body = json.dumps(error_body("", kind, message)).encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


BUSY = _answer(
    "503 Service Unavailable",
    "busy",
    "every connection is answering an authenticated request (server.max_connections)",
)


class ConnectionGuard:
    """The connections of one server: how many are open, and which to close to make room.

    Both pools are dicts used as ordered sets: the first entry is the oldest, and every
    operation is O(1) however many connections are open."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open = 0
        self._strangers: dict[GuardedProtocol, None] = {}
        """Connections without an authenticated request, in the order they opened."""
        self._idle: dict[GuardedProtocol, None] = {}
        """Authenticated connections between requests, in the order they became idle."""

    def protocol(self) -> Callable[..., asyncio.Protocol]:
        """What uvicorn's `Config(http=...)` builds each connection's protocol with."""
        return lambda **uvicorn_args: GuardedProtocol(self, H11Protocol(**uvicorn_args))

    def admit(self, connection: "GuardedProtocol") -> bool:
        """Count a new connection in, closing others to make room; False when every open one
        is answering an authenticated request."""
        while self.open >= self.limits.max_connections:
            victim = next(iter(self._strangers), None) or next(iter(self._idle), None)
            if victim is None:
                return False
            victim.close()
        self.open += 1
        self._strangers[connection] = None
        return True

    def trusted(self, connection: "GuardedProtocol") -> None:
        self._strangers.pop(connection, None)

    def busy(self, connection: "GuardedProtocol") -> None:
        self._idle.pop(connection, None)

    def idle(self, connection: "GuardedProtocol") -> None:
        if connection.trusted:
            self._idle[connection] = None

    def release(self, connection: "GuardedProtocol") -> None:
        self.open -= 1
        self._strangers.pop(connection, None)
        self._idle.pop(connection, None)


class GuardedProtocol(asyncio.Protocol):
    """One connection: uvicorn's protocol inside, the deadlines and the guard's count around
    it. Everything the transport says is passed on to `inner` unchanged."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.BaseTransport | None = None
        self.trusted = False
        self.requests = 0
        """Requests of this connection the app is answering (two, briefly, when a pipelined
        one starts before the last one's app has returned)."""
        self._between = False
        """After an answer, before the first byte of the next request."""
        self._heard = False
        """Bytes of a request head have come since the last answer (a timeout gets a 408)."""
        self._counted = False
        self._deadline: float | None = None
        """When the connection is closed unless the app has taken a request by then."""
        self._timer: asyncio.TimerHandle | None = None

    # -------------------------------------------------------------- transport -> protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.inner.connection_made(transport)
        if not self.guard.admit(self):
            self.close(BUSY)
            return
        self._counted = True
        self._due(self.guard.limits.header_timeout)

    def data_received(self, data: bytes) -> None:
        if self.requests == 0:
            self._heard = True
            if self._between:
                self._between = False
                self._due(self.guard.limits.header_timeout)
        token = CURRENT.set(self)
        try:
            self.inner.data_received(data)
        finally:
            CURRENT.reset(token)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # -------------------------------------------------------------- app -> connection

    def request_started(self) -> None:
        self.requests += 1
        self._deadline = None
        self.guard.busy(self)

    def request_ended(self) -> None:
        self.requests -= 1
        if self.requests == 0 and self._counted:
            self._between, self._heard = True, False
            self.guard.idle(self)
            self._due(self.guard.limits.idle_timeout)

    def authenticated(self) -> None:
        if not self.trusted:
            self.trusted = True
            self.guard.trusted(self)

    # -------------------------------------------------------------- closing

    def close(self, answer: bytes = b"") -> None:
        """Close now, after writing `answer` when there is one."""
        self._forget()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        assert isinstance(transport, asyncio.Transport)
        if answer:
            transport.write(answer)
            transport.close()  # once the answer has gone
        else:
            transport.abort()

    def _timed_out(self) -> None:
        """A client that sent part of a request is told why it is cut off; one that sent
        nothing is closed, as uvicorn closes a kept-alive connection."""
        if self._heard:
            seconds = self.guard.limits.header_timeout
            self.close(
                _answer(
                    "408 Request Timeout",
                    "timeout",
                    f"the request's head did not come whole within {seconds:g} s "
                    "(server.header_timeout)",
                )
            )
        else:
            self.close()

    def _due(self, seconds: float) -> None:
        """Set the deadline. The timer is moved only when it would fire too late, so requests
        on a kept-alive connection cost at most one timer per idle period: cancelling and
        re-arming one per request took 6 us, three times the rest of the guard."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + seconds
        if self._timer is None or self._timer.when() > self._deadline:
            self._cancel_timer()
            self._timer = loop.call_at(self._deadline, self._check, self._deadline)

    def _check(self, due: float) -> None:
        """The timer set for `due` fired: close the connection if that is still its deadline,
        else wait for the one it has now (none while a request is being answered)."""
        self._timer = None
        if self._deadline is None:
            return
        if self._deadline > due:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(self._deadline, self._check, self._deadline)
        else:
            self._timed_out()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _forget(self) -> None:
        self._cancel_timer()
        if self._counted:
            self._counted = False
            self.guard.release(self)


CURRENT: ContextVar[GuardedProtocol] = ContextVar("opencomposer_http_connection")
"""The connection whose bytes uvicorn is parsing, and so of the request a task answers."""


def authenticated() -> None:
    """The request being answered carries the token: its connection is no longer a stranger.
    (Outside a guarded server, in-process tests, there is no connection to tell.)"""
    connection = CURRENT.get(None)
    if connection is not None:
        connection.authenticated()


class ConnectionUse:
    """ASGI middleware, outermost: tells the connection when the app takes a request and when
    it is done with it, which is when the connection's deadlines stop and start again.
    `trust_every_request`: the server has no token (`server.auth = "none"`)."""

    def __init__(self, app: ASGIApp, trust_every_request: bool) -> None:
        self.app = app
        self.trust_every_request = trust_every_request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = CURRENT.get(None)
        if connection is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection.request_started()
        if self.trust_every_request:
            connection.authenticated()
        try:
            await self.app(scope, receive, send)
        finally:
            connection.request_ended()


def server_config(app: ASGIApp, server: ServerSettings, **options: Any) -> uvicorn.Config:
    """uvicorn set up to serve `app` (made by `create_app`, which adds `ConnectionUse`) through
    the guard: with h11, so that what the tests see is what runs; no WebSocket (no route has
    one, and an upgrade hands the socket to a protocol outside the guard); no proxy headers
    (any local process could then name the client address); kept-alive connections closed after
    `server.idle_timeout` by uvicorn too; a stop waits `server.shutdown_timeout` for requests
    in flight, then cancels them. `options` go to `uvicorn.Config`."""
    guard = ConnectionGuard(ConnectionLimits.from_settings(server))
    return uvicorn.Config(
        app,
        http=cast(type[asyncio.Protocol], guard.protocol()),
        ws="none",
        proxy_headers=False,
        timeout_keep_alive=math.ceil(server.idle_timeout),
        timeout_graceful_shutdown=math.ceil(server.shutdown_timeout),
        log_level="warning",
        backlog=ACCEPT_BATCH,
        **options,
    )
