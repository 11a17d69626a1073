"""One editor connection served: `framing` reads the messages, pygls dispatches them and writes.

The loop ends at `exit` (pygls ends the process from its handler), at the end of the stream
(the editor went away) or at a framing error. A framing error cannot be recovered from (where
the next message starts is unknown), so it is logged as one line and, once the runtime is
closed, ends the process with status 1: an editor restarts a server that crashed, never one
that silently stopped answering.
"""

import asyncio
import json
import logging
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Protocol

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.protocol import JsonRPCProtocol

from opencomposer.lsp.framing import BlockingInput, FramingError, MessageReader, ThreadedSource

log = logging.getLogger(__name__)

FRAMING_ERROR_STATUS = 1
"""The process's exit status after a framing error: a crash, to the editor."""


class Served(Protocol):
    """The language server, as a transport sees it."""

    @property
    def protocol(self) -> JsonRPCProtocol:
        """Read-only here, so that a server whose protocol is a subclass (pygls'
        `LanguageServerProtocol`) is one too."""
        ...

    @property
    def thread_pool(self) -> ThreadPoolExecutor: ...

    def report_server_error(self, error: Exception, source: Any) -> None: ...

    async def close(self) -> None:
        """Interrupt running turns and close the trace store."""
        ...

    def shutdown(self) -> None: ...


def dispatch(server: Served, body: bytes | bytearray) -> None:
    """What pygls' own loop does with a body: a message that cannot be read (not JSON, not
    JSON-RPC, params of the wrong shape) goes to `report_server_error`, which answers it, and
    the stream stays in step."""
    protocol = server.protocol
    try:
        message = json.loads(body, object_hook=protocol.structure_message)
        protocol.handle_message(message)
    except Exception as exc:  # as pygls' loop: no message ends the loop, `exit` aside
        server.report_server_error(exc, JsonRpcException)


async def serve_stream(
    server: Served, reader: MessageReader, first: bytearray | None = None
) -> int:
    """Dispatch `first` (a message the caller already read), then every message of `reader`.
    When the stream ends, requests still being handled are cancelled and the runtime is closed
    while the loop still runs (asyncio.run's teardown would cancel every task at once, and a
    background job whose supervisor is cancelled first is left running). Returns the process's
    exit status."""
    try:
        if first is not None:
            dispatch(server, first)
        while (body := await reader.next_message()) is not None:
            dispatch(server, body)
    except FramingError as exc:
        log.error("stopping: the client's LSP stream is broken: %s", exc)
        return FRAMING_ERROR_STATUS
    finally:
        cancel_in_flight(server.protocol)
        await server.close()
    return 0


def cancel_in_flight(protocol: JsonRPCProtocol) -> None:
    """Cancel the handlers of the client's requests and the server's requests to the client:
    no answer can reach the client any more, and a handler left running would use the runtime
    after it is closed (a `thread/list` read just before the stream broke failed on the closed
    trace store). Running turns are the runtime's to interrupt."""
    for future in list(protocol._request_futures.values()):
        future.cancel()


def run_until_done(server: Served, main: Coroutine[Any, Any, int]) -> None:
    """Run a transport's main coroutine, then pygls' shutdown (its thread pool); a non-zero
    status ends the process, as pygls' `exit` handler does."""
    status = 0
    try:
        status = asyncio.run(main)
    except BrokenPipeError:
        log.warning("the connection to the client is lost")
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    if status:
        raise SystemExit(status)


def serve_stdio(server: Served, stdin: BlockingInput, stdout: BinaryIO) -> None:
    """Serve the client at the other end of stdin and stdout until it exits or goes away."""
    server.protocol.set_writer(StdoutWriter(stdout))
    reader = MessageReader(ThreadedSource(stdin, server.thread_pool))
    run_until_done(server, serve_stream(server, reader))
