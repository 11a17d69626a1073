"""The language server against clients that misbehave, spoken to in raw JSON-RPC (a client
library would refuse to send most of this): requests before `initialize` or after `shutdown`,
unreadable messages, unknown methods and params of the wrong shape all get the error the spec
asks for, and the server keeps serving. A client that goes away mid-turn leaves the turn closed
as interrupted in the trace store and no background job behind; over TCP only the client with
the token is served, and only that one connection.
"""

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty, Queue
from typing import Any, BinaryIO
from unittest.mock import ANY

import pytest

from opencomposer.agent.protocol.items import ItemStatus
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.traces.store import TraceStore
from opencomposer.lsp.server import protocol_capabilities

SERVER = Path(__file__).resolve().parents[1] / "support" / "scripted_lsp_server.py"
CLI = Path(sys.executable).parent / "opencomposer"
WAIT = 30.0
"""Longest wait for a message or an exit; a passing test waits for milliseconds."""


class RawClient:
    """JSON-RPC with Content-Length framing: read from `incoming` (a pipe or a socket) in a
    thread, so that every wait is bounded and the client can stop reading at any point."""

    def __init__(self, incoming: BinaryIO | socket.socket, outgoing: BinaryIO) -> None:
        self._incoming = incoming
        self._outgoing = outgoing
        self._messages: Queue[dict[str, Any] | None] = Queue()
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
            chunk = os.read(fd, 65536)
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
                self._messages.put(json.loads(rest[:length]))
                buffer = rest[length:]

    def send_body(self, body: bytes) -> None:
        self._outgoing.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self._outgoing.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_body(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return its response (skipping notifications meanwhile)."""
        msg_id = next(self._ids)
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
        try:
            message = self._messages.get(timeout=WAIT)
        except Empty:
            raise AssertionError(f"no message from the server within {WAIT} s") from None
        assert message is not None, "the server closed the connection"
        return message

    def until_notified(self, matches: Callable[[Any], bool]) -> dict[str, Any]:
        """Wait for a notification for which `matches(params)` holds."""
        while True:
            message = self.receive()
            assert "method" in message, f"a response to no request: {message}"
            if "id" not in message and matches(message.get("params")):
                return message

    def initialize(self, root: Path | None = None, **params: Any) -> dict[str, Any]:
        response = self.request("initialize", {
            "processId": None, "rootUri": root.as_uri() if root else None,
            "capabilities": {"experimental": {"opencomposer": {}}}, **params})
        if "result" in response:
            self.notify("initialized", {})
        return response

    def stop_reading(self) -> None:
        self._stop.set()
        self._reader.join(WAIT)


def error(msg_id: Any, code: int, message: Any = ANY, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message, **extra}}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("print('hi')\n")
    return root.resolve()


@pytest.fixture
def start_server(tmp_path: Path, home: Path) -> Iterator[Any]:
    """`start_server(*replies, env=...)`: the scripted server over stdio, as a RawClient and
    its process. Processes still running after the test are killed."""
    started: list[tuple[RawClient, subprocess.Popen[bytes]]] = []

    def start(*replies: dict[str, Any], env: dict[str, str] | None = None
              ) -> tuple[RawClient, subprocess.Popen[bytes]]:
        script = tmp_path / "script.json"
        script.write_text(json.dumps(list(replies)))
        process = subprocess.Popen(
            [sys.executable, str(SERVER), str(script)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env={**os.environ, "OPENCOMPOSER_HOME": str(home),
                                         **(env or {})})
        assert process.stdout is not None and process.stdin is not None
        started.append((RawClient(process.stdout, process.stdin), process))
        return started[-1]

    yield start
    for client, process in started:
        if process.poll() is None:
            process.kill()
        process.wait()
        client.stop_reading()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


# ---------------------------------------------------------------------- the lifecycle


def test_requests_before_initialize_are_refused_and_initialize_still_works(start_server,
                                                                            project):
    client, _ = start_server()
    position = {"textDocument": {"uri": (project / "app.py").as_uri()},
                "position": {"line": 0, "character": 0}}

    assert client.request("textDocument/hover", position) == error(
        1, -32002, "textDocument/hover before initialize")
    # A notification gets no answer, not even an error: the next message answers request 2.
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": (project / "app.py").as_uri(), "languageId": "python", "version": 1,
        "text": "x"}})
    assert client.request("opencomposer/thread/list", {}) == error(
        2, -32002, "opencomposer/thread/list before initialize")

    assert client.initialize(project)["result"]["serverInfo"]["name"] == "opencomposer"
    assert client.request("opencomposer/thread/list", {}) == {
        "jsonrpc": "2.0", "id": 4, "result": {"data": [], "next_cursor": None}}


def test_a_second_initialize_is_refused(start_server, project):
    client, _ = start_server()
    client.initialize(project)

    assert client.initialize(project) == error(2, -32600, "initialize was already sent")
    assert "result" in client.request("opencomposer/thread/list", {})


def test_shutdown_refuses_further_requests_and_exit_ends_the_process_with_0(start_server,
                                                                             project):
    client, process = start_server()
    client.initialize(project)

    assert client.request("shutdown") == {"jsonrpc": "2.0", "id": 2, "result": None}
    assert client.request("opencomposer/thread/list", {}) == error(
        3, -32600, "opencomposer/thread/list after shutdown")
    client.notify("exit")

    # stdin stays open: the server ends because it was told to, not because its input did.
    assert process.wait(WAIT) == 0


def test_exit_without_shutdown_ends_the_process_with_1(start_server, project):
    client, process = start_server()
    client.initialize(project)

    client.notify("exit")

    assert process.wait(WAIT) == 1


# ---------------------------------------------------------------------- unreadable messages


@pytest.mark.parametrize(("body", "code"), [
    (b'{"jsonrpc": "2.0", "id": 7, "method": ', -32700),  # cut short
    (b"{'jsonrpc': '2.0'}", -32700),
    (b"[1, 2]", -32600),
    (b'"initialize"', -32600),
    (b'{"jsonrpc": "2.0"}', -32600),
    (b'{"id": 8, "method": "shutdown"}', -32600),  # no "jsonrpc"
    (b'{"jsonrpc": "2.0", "id": 9}', -32600),  # a reply to nothing, without a result
])
def test_an_unreadable_message_gets_an_error_with_a_null_id(start_server, project, body, code):
    client, _ = start_server()
    client.initialize(project)

    client.send_body(body)

    assert client.receive() == error(None, code)
    assert "result" in client.request("opencomposer/thread/list", {})


def test_an_unknown_method_is_not_found(start_server, project):
    client, _ = start_server()
    client.initialize(project)

    assert client.request("opencomposer/thread/frobnicate", {}) == error(2, -32601)
    assert client.request("textDocument/noSuchThing", {}) == error(3, -32601)
    assert "result" in client.request("opencomposer/thread/list", {})


def test_params_of_the_wrong_shape_are_answered_with_the_request_id(start_server, project):
    client, _ = start_server()
    client.initialize(project)
    uri = (project / "app.py").as_uri()

    # Refused while reading the message (lsprotocol types)...
    assert client.request("textDocument/inlineCompletion", {"textDocument": 5}) == error(2, -32602)
    assert client.request("textDocument/completion", [uri]) == error(3, -32602)
    # ...by the agent protocol's models...
    assert client.request("opencomposer/thread/start", {"workspace": 5}) == error(
        4, -32602, data={"kind": "invalid_request"})
    assert client.request("opencomposer/turn/start", {"thread_id": 5, "input": []}) == error(
        5, -32602, data={"kind": "invalid_request"})
    # ...and by commands.
    assert client.request("workspace/executeCommand", {"command": "opencomposer.ask"}) == error(
        6, -32602)
    assert client.request("workspace/executeCommand", {
        "command": "opencomposer.completion.accepted", "arguments": [{"id": 1}]}) == error(
        7, -32602, "completion telemetry takes the completion id")
    # A notification is never answered: the next message answers request 8.
    client.notify("textDocument/didOpen", {"textDocument": 3})
    assert client.request("opencomposer/thread/list", {}) == {
        "jsonrpc": "2.0", "id": 8, "result": {"data": [], "next_cursor": None}}


# ---------------------------------------------------------------------- a client that goes away


def fake_bwrap(folder: Path) -> Path:
    """A `bwrap` that cannot sandbox, first on PATH: commands run in the fallback sandbox,
    whose jobs do not die with the server process on their own (bubblewrap's do)."""
    folder.mkdir()
    program = folder / "bwrap"
    program.write_text("#!/bin/sh\necho 'no namespaces here' >&2\nexit 1\n")
    program.chmod(0o755)
    return folder


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("how", ["stdin closed", "both pipes closed"])
def test_a_client_that_goes_away_mid_turn_leaves_the_turn_interrupted(
        start_server, project, home, tmp_path, how):
    pid_file = project / "job.pid"
    client, process = start_server(
        {"calls": [["run_terminal", {"command": f"echo $$ > {pid_file}; exec sleep 600",
                                     "background": True}]]},
        {"text": "Let me think about this", "hang_after": 1},
        env={"PATH": f"{fake_bwrap(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
             "OPENCOMPOSER_AGENT__APPROVAL__DANGEROUS": "auto"})
    client.initialize(project)
    thread = client.request("opencomposer/thread/start", {"workspace": str(project)})
    thread_id = thread["result"]["thread"]["id"]
    client.request("opencomposer/turn/start", {"thread_id": thread_id,
                                               "input": [{"type": "text", "text": "go"}]})
    # The model has streamed its first words and hangs.
    delta = client.until_notified(lambda event: event["type"] == "item.delta"
                                  and event["delta"]["kind"] == "text")["params"]["delta"]
    job = int(pid_file.read_text())
    assert running(job)

    client.stop_reading()
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    if how == "both pipes closed":  # as when the editor is killed: writes fail too
        process.stdout.close()

    assert process.wait(WAIT) == 0
    store = TraceStore(home / "traces.db")
    [turn] = store.turns(thread_id)
    events = store.events(thread_id)
    assert (turn.status, turn.stop_reason) == (TurnStatus.interrupted, StopReason.interrupted)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert (events[0].type, events[-1].type) == ("thread.started", "turn.completed")
    assert [item.status for item in turn.items] == [
        ItemStatus.completed, ItemStatus.completed, ItemStatus.interrupted]
    assert turn.items[-1].text == delta["text"]  # what the model wrote before the client left
    store.close()
    assert not running(job)


# ---------------------------------------------------------------------- the real command


@pytest.fixture
def tcp_server(home: Path, tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`opencomposer lsp --tcp PORT` with a token, once it listens (it says so on stderr)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [str(CLI), "lsp", "--tcp", str(port), "-c", "server.token=secret",
             "--engine", "openai:http://127.0.0.1:9/v1"],  # never asked: nothing is generated
            stderr=stderr, env={**os.environ, "OPENCOMPOSER_HOME": str(home)})
    deadline = time.monotonic() + WAIT
    while b"listening on" not in log.read_bytes():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the server did not start listening"
        time.sleep(0.05)
    yield port, process
    if process.poll() is None:
        process.kill()
    process.wait()


def unauthorized(msg_id: int) -> dict[str, Any]:
    return error(msg_id, -32803, "a valid token is required in initializationOptions.token",
                 data={"kind": "unauthorized"})


def test_over_tcp_only_the_client_with_the_token_is_served(tcp_server, project):
    port, process = tcp_server
    connection = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    outgoing = connection.makefile("wb")
    client = RawClient(connection, outgoing)

    assert client.initialize(project) == unauthorized(1)
    assert client.request("opencomposer/thread/list", {}) == error(
        2, -32002, "opencomposer/thread/list before initialize")
    assert client.initialize(project, initializationOptions={"token": "secrets"}) == \
        unauthorized(3)
    assert client.initialize(project, initializationOptions={"token": "secret"})["result"]
    assert client.request("opencomposer/thread/list", {})["result"] == {
        "data": [], "next_cursor": None}

    # One connection per server: another local user cannot ride on this one's token.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT)

    assert client.request("shutdown") == {"jsonrpc": "2.0", "id": 6, "result": None}
    client.notify("exit")
    assert process.wait(WAIT) == 0
    client.stop_reading()
    outgoing.close()
    connection.close()


def test_check_prints_the_advertised_capabilities(home):
    done = subprocess.run([str(CLI), "lsp", "--check"], capture_output=True, check=True,
                          env={**os.environ, "OPENCOMPOSER_HOME": str(home)}, timeout=WAIT)

    capabilities = json.loads(done.stdout)
    assert capabilities["inlineCompletionProvider"] == {}
    assert capabilities["positionEncoding"] == "utf-16"
    assert capabilities["experimental"] == protocol_capabilities()
    assert set(capabilities["executeCommandProvider"]["commands"]) == set(
        protocol_capabilities()["opencomposer"]["commands"])
