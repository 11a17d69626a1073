"""Talking to the language server in raw bytes, as a misbehaving client would (a client library
would refuse to send most of it): a JSON-RPC client over a pipe or a socket, and the real
`opencomposer lsp` command started over stdio or TCP.

Every wait is bounded by WAIT: reading happens in a thread that puts what arrives on a queue.
"""

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any, BinaryIO
from unittest.mock import ANY

import pytest

from opencomposer.lsp.framing import frame

CLI = Path(sys.executable).parent / "opencomposer"
NO_MODEL = ("--engine", "openai:http://127.0.0.1:9/v1")
"""An engine nobody asks (port 9 discards): for tests in which nothing is generated."""
WAIT = 30.0
"""Longest wait for a message, a closed connection or an exit; a passing test waits for
milliseconds, or for the TCP listener's 10 s authentication deadline."""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The server's data folder."""
    return tmp_path / "data"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A one-file workspace folder for the server's threads."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("print('hi')\n")
    return root.resolve()


class RawClient:
    """JSON-RPC with Content-Length framing: read from `incoming` (a pipe or a socket) in a
    thread, so that every wait is bounded and the client can stop reading at any point.

    The server's `window/logMessage` notifications are its log, not protocol traffic: they
    are kept apart in `logged` (their params, in order) so that tests of replies see replies."""

    def __init__(self, incoming: BinaryIO | socket.socket, outgoing: BinaryIO) -> None:
        self._incoming = incoming
        self._outgoing = outgoing
        self._messages: Queue[dict[str, Any] | None] = Queue()
        self.logged: Queue[dict[str, Any]] = Queue()
        self._stop = threading.Event()
        self._ids = iter(range(1, 1_000_000))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        fd = self._incoming.fileno()
        while not self._stop.is_set():
            if not select.select([fd], [], [], 0.05)[0]:
                continue
            try:
                chunk = os.read(fd, 65536)
            except ConnectionResetError:  # the server closed with our bytes unread
                chunk = b""
            if not chunk:
                self._messages.put(None)  # end of stream
                return
            buffer += chunk
            while b"\r\n\r\n" in buffer:
                head, _, rest = buffer.partition(b"\r\n\r\n")
                fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
                length = int(fields[b"Content-Length"])
                if len(rest) < length:
                    break
                message = json.loads(rest[:length])
                if message.get("method") == "window/logMessage":
                    self.logged.put(message["params"])
                else:
                    self._messages.put(message)
                buffer = rest[length:]

    def send_raw(self, data: bytes) -> None:
        self._outgoing.write(data)
        self._outgoing.flush()

    def send_body(self, body: bytes) -> None:
        self.send_raw(frame(body))

    def send(self, message: dict[str, Any]) -> None:
        self.send_body(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, "params": params})

    def next_id(self) -> int:
        return next(self._ids)

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return its response (skipping notifications meanwhile)."""
        msg_id = self.next_id()
        self.send({"id": msg_id, "method": method, "params": params})
        return self.response(msg_id)

    def response(self, msg_id: Any) -> dict[str, Any]:
        while True:
            message = self.receive()
            if "method" not in message and message.get("id") == msg_id:
                return message
            assert "method" in message, f"a response to another request: {message}"

    def receive(self) -> dict[str, Any]:
        """The next message from the server; fails on a stream that ended or a long wait."""
        message = self._next()
        assert message is not None, "the server closed the connection"
        return message

    def until_closed(self) -> list[dict[str, Any]]:
        """Every message until the server closes the stream; fails if it stays open."""
        received = []
        while (message := self._next()) is not None:
            received.append(message)
        return received

    def _next(self) -> dict[str, Any] | None:
        try:
            return self._messages.get(timeout=WAIT)
        except Empty:
            raise AssertionError(f"nothing from the server within {WAIT} s") from None

    def until_notified(self, matches: Any) -> dict[str, Any]:
        """Wait for a notification for which `matches(params)` holds."""
        while True:
            message = self.receive()
            assert "method" in message, f"a response to no request: {message}"
            if "id" not in message and matches(message.get("params")):
                return message

    def initialize(self, root: Path | None = None, **params: Any) -> dict[str, Any]:
        response = self.request("initialize", initialize_params(root, **params))
        if "result" in response:
            self.notify("initialized", {})
        return response

    def stop_reading(self) -> None:
        self._stop.set()
        self._reader.join(WAIT)


def initialize_params(root: Path | None = None, **params: Any) -> dict[str, Any]:
    return {
        "processId": None,
        "rootUri": root.as_uri() if root else None,
        "capabilities": {"experimental": {"opencomposer": {}}},
        **params,
    }


def error(msg_id: Any, code: int, message: Any = ANY, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message, **extra}}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listen_over_tcp(home: Path, stderr: Path, token: str) -> tuple[int, subprocess.Popen[bytes]]:
    """`opencomposer lsp --tcp PORT` with `token`, once it listens (it logs so on stderr)."""
    port = free_port()
    with stderr.open("wb") as log:
        process = subprocess.Popen(
            [str(CLI), "lsp", "--tcp", str(port), "-c", f"server.token={token}", *NO_MODEL],
            stderr=log,
            env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
        )
    deadline = time.monotonic() + WAIT
    while b"listening on" not in stderr.read_bytes():
        assert process.poll() is None, stderr.read_text()
        assert time.monotonic() < deadline, "the server did not start listening"
        time.sleep(0.05)
    return port, process


class TcpConnection:
    """A socket to the server with a RawClient on it."""

    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self._outgoing = self.socket.makefile("wb")
        self.client = RawClient(self.socket, self._outgoing)

    def close(self) -> None:
        self.client.stop_reading()
        self._outgoing.close()
        self.socket.close()
