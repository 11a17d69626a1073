"""The language server's protocol, hardened for an editor-facing server: the checks on a
message that `framing` has read and pygls has parsed.

Requests are served only between a successful `initialize` and `shutdown`, a second
`initialize` is refused, a message that cannot be read (malformed JSON, params of the wrong
shape) is answered with the JSON-RPC error it deserves, a handler's traceback goes to the log
rather than to the client, and a late reply to a cancelled server request is dropped. Message
size limits and framing are `framing`'s; the stdio and TCP transports are `transport`'s and
`tcp`'s.
"""

import logging
from collections.abc import Generator
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)


class UnreadableMessage(JsonRpcException):
    """A message pygls could not structure, with whom to answer: the exception reaches
    `report_server_error` without the message."""

    def __init__(self, error: JsonRpcException, data: dict[str, Any]) -> None:
        super().__init__(error.message, error.code)
        self.msg_id = data.get("id") if "method" in data else None
        """The request's id; None for a reply that cannot be read (its id is the server's)."""

        self.answered = "id" in data or "method" not in data
        """False for a notification: JSON-RPC never answers those, not even with an error."""


class GuardedProtocol(LanguageServerProtocol):
    """pygls' protocol with the checks an editor-facing server needs: no request is served
    before `initialize` succeeded (LSP's ServerNotInitialized), nor a second `initialize`, and a
    request after `shutdown` is refused (InvalidRequest) where pygls would leave it unanswered;
    a request whose params do not fit is answered with its own id; and a reply to a server
    request whose waiter is gone (cancelled: an interrupted turn) is dropped instead of raising
    `InvalidStateError` in the reader loop (pygls#621)."""

    def handle_message(self, message: Any) -> None:
        server = self._server
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        ready = isinstance(server, GuardedServer) and server.ready
        if method is not None and not ready and method not in (lsp.INITIALIZE, lsp.EXIT):
            if msg_id is not None:
                early = JsonRpcServerNotInitialized(f"{method} before initialize")
                self._send_response(msg_id, error=early.to_response_error())
            return  # notifications before initialize are dropped, as the spec says
        if method is not None and method != lsp.EXIT and self._shutdown and msg_id is not None:
            late = JsonRpcInvalidRequest(f"{method} after shutdown")
            self._send_response(msg_id, error=late.to_response_error())
            return
        super().handle_message(message)

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcInvalidParams as exc:
            raise UnreadableMessage(exc, data) from exc
        except JsonRpcException as exc:  # pygls calls a malformed envelope an internal error
            raise UnreadableMessage(JsonRpcInvalidRequest(), data) from exc

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams) -> Generator[Any, Any, Any]:
        server = self._server
        if isinstance(server, GuardedServer) and server.ready:
            # pygls would replace the workspace (the open documents), and a second runtime
            # would orphan the first one's turns.
            raise JsonRpcInvalidRequest("initialize was already sent")
        result = yield from super().lsp_initialize(params)
        if isinstance(server, GuardedServer):
            result.capabilities.experimental = server.experimental
        return result

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """pygls puts the traceback of a handler's unexpected exception in the error it sends;
        it goes to the log instead, and the client gets the message."""
        if error is not None and isinstance(error.data, dict) and "traceback" in error.data:
            log.error("a handler failed: %s\n%s", error.message, "".join(error.data["traceback"]))
            error = lsp.ResponseError(code=error.code, message=error.message)
        super()._send_response(msg_id, result, error)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            self._request_futures.pop(msg_id, None)
            log.debug("dropped a reply to a request nobody waits for", extra={"id": msg_id})
            return
        super()._handle_response(msg_id, result, error)


class GuardedServer(LanguageServer):
    """A pygls server whose protocol is `GuardedProtocol`, and which answers messages it
    cannot read. `ready` is set by the subclass once its `initialize` handler has succeeded;
    `experimental` is what `initialize` answers in `capabilities.experimental`."""

    def __init__(self, name: str, version: str, *, experimental: dict[str, Any]) -> None:
        super().__init__(name, version, protocol_cls=GuardedProtocol)
        self.ready = False
        self.experimental = experimental

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A message that could not be read (malformed JSON, params of the wrong shape) gets
        the JSON-RPC error it deserves: with the request's id when it has one, else with a
        null id as the spec says (pygls would leave `id` out); a notification gets none.
        Handler failures were already answered by pygls."""
        if source is JsonRpcException and getattr(error, "answered", True):
            # Not JSON: a syntax error, bytes that are not UTF-8, nesting Python cannot recurse.
            code = (
                -32700
                if isinstance(error, ValueError | RecursionError)
                else getattr(error, "code", -32600)
            )
            message = f"cannot read the message: {error}"
            self.protocol._send_data(
                {
                    "jsonrpc": "2.0",
                    "id": getattr(error, "msg_id", None),
                    "error": {"code": code, "message": message},
                }
            )
        log.warning(
            "LSP error",
            extra={"error": repr(error), "source": getattr(source, "__name__", str(source))},
        )
