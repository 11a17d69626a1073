"""The server's log lines below ERROR, sent to the editor as `window/logMessage` at their
level: an LSP client shows everything a server writes to stderr as an error (VS Code's output
channel marks each such line `[error]`), so informational lines there would read as failures.
Errors stay on stderr, where the client shows them as what they are; the log file keeps
everything.

Until the client has sent `initialize` the server may not send it anything, so records are
held (the last `HELD`) and sent once it has.
"""

import asyncio
import contextlib
import logging
import threading
from collections import deque

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from opencomposer.logs import LOGGER_NAME, record_fields

_TYPES = ((logging.WARNING, lsp.MessageType.Warning), (logging.INFO, lsp.MessageType.Info))
HELD = 200


def message_type(level: int) -> lsp.MessageType:
    return next((kind for floor, kind in _TYPES if level >= floor), lsp.MessageType.Log)


class ClientLogHandler(logging.Handler):
    """Sends each record to the client from the server's event loop, whatever thread logged
    it (the code indexes log from worker threads). A record logged while one is being sent
    is dropped, so a failure to send cannot log itself without end."""

    def __init__(self) -> None:
        super().__init__()
        self._server: LanguageServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._held: deque[lsp.LogMessageParams] = deque(maxlen=HELD)
        self._sending = threading.local()

    def connect(self, server: LanguageServer, loop: asyncio.AbstractEventLoop) -> None:
        """The client has initialized: send what was held, then each record as it comes."""
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self._server, self._loop = server, loop
            held = list(self._held)
            self._held.clear()
        for params in held:
            self._send(params)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._sending, "active", False):
            return
        name = record.name.removeprefix(LOGGER_NAME + ".")
        fields = " ".join(f"{k}={v}" for k, v in record_fields(record).items())
        text = f"{name}: {record.getMessage()}" + (f"  {fields}" if fields else "")
        params = lsp.LogMessageParams(type=message_type(record.levelno), message=text)
        if self._loop is None:  # emit holds self.lock, as connect does
            self._held.append(params)
            return
        if self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._send(params)
        else:
            self._loop.call_soon_threadsafe(self._send, params)

    def _send(self, params: lsp.LogMessageParams) -> None:
        self._sending.active = True
        try:
            # The client gone (a closed pipe): the line is in the log file all the same.
            with contextlib.suppress(OSError, RuntimeError):
                if self._server is not None and self._server.protocol.writer is not None:
                    self._server.window_log_message(params)
        finally:
            self._sending.active = False
