"""LSP over TCP: a loopback listener that hostile local connections cannot take down.

Any process on the machine can connect to 127.0.0.1, and a web page can make the browser
send an HTTP request there. So each connection is a stranger until its first message is an
`initialize` with the token in `initializationOptions.token`, sent within AUTH_DEADLINE_S:
until then it is read by its own `MessageReader` with a small limit, and nothing of it reaches
the server's protocol (a hostile connection cannot initialize the workspace, send `exit`, or
leave a half-read message behind). One that fails is answered when it sent a request (so a
user with the wrong token is told), then closed, and the listener goes on. The first that
passes becomes the client: the listener closes, other connections still authenticating are
closed, and the process ends with that client's session, as over stdio.

At most MAX_STRANGERS connections authenticate at once; a new one closes the one waiting
longest, so a process that opens connections and holds them cannot use up the descriptors
(1,024 by default) and keep the editor out: the editor sends its `initialize` as it connects,
and is let in long before it is the oldest.
"""

import asyncio
import hmac
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from pygls.exceptions import JsonRpcServerNotInitialized

from opencomposer.lsp.framing import MAX_MESSAGE_BYTES, FramingError, MessageReader, frame
from opencomposer.lsp.transport import Served, run_until_done, serve_stream
from opencomposer.lsp.wire import REQUEST_FAILED

log = logging.getLogger(__name__)

AUTH_DEADLINE_S = 10.0
"""How long a connection has to send its `initialize`. An editor sends it as soon as it has
connected (milliseconds); a connection that says nothing is closed after this long."""

MAX_INITIALIZE_BYTES = 256 * 1024
"""The largest first message. Recorded editors' `initialize` capabilities are 2.1 KB (Emacs 29)
to 4.4 KB (VS Code 1.65, pytest-lsp's recordings); this leaves room for many workspace folders
and bounds what each stranger may make the server hold."""

MAX_STRANGERS = 256
"""Connections authenticating at once. The editor's is closed only if this many connect after
it before its `initialize` is read, a few turns of the event loop, each accepting at most
ACCEPT_BATCH; it bounds what strangers hold to 256 descriptors and, at MAX_INITIALIZE_BYTES
each, 64 MiB for at most AUTH_DEADLINE_S."""

ACCEPT_BATCH = 16
"""The listen backlog, which is also how many connections asyncio accepts in one go: small,
so that few can arrive between the editor's connection and its `initialize`."""

UNAUTHORIZED = "a valid token is required in initializationOptions.token"


@dataclass(frozen=True)
class Refusal:
    """Why a connection is not let in, and the reply it gets (None: nothing to reply to)."""

    reason: str
    reply: dict[str, Any] | None = None


def refusal(body: bytes | bytearray, token: str) -> Refusal | None:
    """What the first message of a connection lacks to let it in; None when it is an
    `initialize` request with the token."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return Refusal("its first message is not JSON")
    if (
        not isinstance(message, dict)
        or "id" not in message
        or not isinstance(message.get("method"), str)
    ):
        return Refusal("its first message is not a request")
    msg_id = message["id"] if isinstance(message["id"], int | str) else None
    if message["method"] != "initialize":
        error = JsonRpcServerNotInitialized(f"{message['method'][:60]} before initialize")
        return Refusal(
            f"its first request is {message['method'][:60]!r}",
            _error_reply(msg_id, error.code, error.message),
        )
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    offered = options.get("token") if isinstance(options, dict) else None
    # surrogatepass: JSON may carry a lone surrogate, which strict UTF-8 cannot encode.
    if not isinstance(offered, str) or not hmac.compare_digest(
        offered.encode("utf-8", "surrogatepass"), token.encode()
    ):
        return Refusal(
            "its initialize has no valid token",
            _error_reply(msg_id, REQUEST_FAILED, UNAUTHORIZED, {"kind": "unauthorized"}),
        )
    return None


def _error_reply(
    msg_id: int | str | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


@dataclass
class Admitted:
    """The connection let in, with what its reader already holds."""

    reader: MessageReader
    writer: asyncio.StreamWriter
    initialize: bytearray


class Gate:
    """Authenticates each connection on its own; the first to pass is `admitted`."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.admitted: asyncio.Future[Admitted] = asyncio.get_running_loop().create_future()
        self._strangers: dict[asyncio.StreamWriter, None] = {}
        """Connections authenticating, oldest first (a dict as an ordered set)."""
        self._shed: set[asyncio.StreamWriter] = set()
        """Strangers closed to make room, until their reader has seen it."""

    async def connected(self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """asyncio's callback for an accepted connection: it closes the connection unless it
        is let in, and every refusal ends in a log line, not an exception (asyncio would log
        its traceback)."""
        if self.admitted.done():  # accepted just before the listener closed
            writer.close()
            return
        if len(self._strangers) >= MAX_STRANGERS:
            oldest = next(iter(self._strangers))
            del self._strangers[oldest]
            self._shed.add(oldest)
            oldest.close()
        self._strangers[writer] = None
        reader = MessageReader(stream, MAX_INITIALIZE_BYTES)
        try:
            body, why = await self._first_message(reader, writer)
        finally:
            self._strangers.pop(writer, None)
        if writer in self._shed:
            self._shed.discard(writer)
            why = f"{MAX_STRANGERS} newer connections were authenticating"
        elif self.admitted.done():
            why = "another connection was let in first"
        elif body is not None:
            self.admitted.set_result(Admitted(reader, writer, body))
            return
        log.warning(
            "refused an LSP connection: %s",
            why,
            extra={"peer": str(writer.get_extra_info("peername"))},
        )
        writer.close()

    async def _first_message(
        self, reader: MessageReader, writer: asyncio.StreamWriter
    ) -> tuple[bytearray | None, str]:
        """The connection's `initialize` when it may come in, else why not."""
        try:
            async with asyncio.timeout(AUTH_DEADLINE_S):
                body = await reader.next_message()
                if body is None:
                    return None, "it closed before initialize"
                refused = refusal(body, self.token)
                if refused is None:
                    return body, ""
                if refused.reply is not None:
                    writer.write(frame(json.dumps(refused.reply).encode()))
                    await writer.drain()
                return None, refused.reason
        except TimeoutError:
            return None, f"no initialize within {AUTH_DEADLINE_S:g} s"
        except FramingError as exc:
            return None, str(exc)
        except ConnectionError as exc:
            return None, f"the connection failed: {exc}"

    def close_strangers(self) -> None:
        """Close the connections still authenticating: their reads end, and so do they."""
        for writer in list(self._strangers):
            writer.close()


async def listen(server: Served, host: str, port: int, token: str) -> int:
    """Accept connections until one is let in, then serve it; its exit status."""
    gate = Gate(token)
    try:
        listener = await asyncio.start_server(gate.connected, host, port, backlog=ACCEPT_BATCH)
    except OSError as exc:  # the port is taken, or not ours to take
        log.error(
            "cannot listen on %s:%d: %s", host, port, os.strerror(exc.errno) if exc.errno else exc
        )
        return 1
    log.info("listening on %s:%d", host, port)
    try:
        admitted = await gate.admitted
    finally:
        listener.close()
        gate.close_strangers()
    admitted.reader.max_message_bytes = MAX_MESSAGE_BYTES
    server.protocol.set_writer(admitted.writer)
    try:
        return await serve_stream(server, admitted.reader, admitted.initialize)
    finally:
        admitted.writer.close()


def serve_tcp(server: Served, host: str, port: int, token: str) -> None:
    """Serve the first client on host:port that authenticates, until it exits or goes away."""
    run_until_done(server, listen(server, host, port, token))
