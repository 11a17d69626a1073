"""What a client is sent when a handler fails unexpectedly: the message, never the server's
traceback (pygls would put it in the error's data); the traceback goes to the log."""

import json
import logging
import sys
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInternalError

from opencomposer.config import Settings
from opencomposer.lsp.server import OpenComposerServer


class Captured:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        body = data.split(b"\r\n\r\n", 1)[1]
        self.messages.append(json.loads(body))

    def close(self) -> None:
        return None


def test_an_internal_error_reaches_the_client_without_its_traceback(tmp_path, caplog):
    server = OpenComposerServer(Settings(home=tmp_path), lambda: None)  # type: ignore[arg-type]
    writer = Captured()
    server.protocol.set_writer(writer)
    try:
        raise ZeroDivisionError("division by zero in a handler")
    except ZeroDivisionError:
        error = JsonRpcInternalError.of(sys.exc_info()).to_response_error()
    assert "traceback" in error.data  # what pygls builds

    with caplog.at_level(logging.ERROR):
        server.protocol._send_response(7, error=error)

    [reply] = writer.messages
    assert reply["id"] == 7
    assert reply["error"] == {
        "code": lsp.ErrorCodes.InternalError,
        "message": "ZeroDivisionError: division by zero in a handler",
    }
    assert "test_an_internal_error_reaches_the_client" in caplog.text  # the traceback, logged
