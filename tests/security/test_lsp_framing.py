"""The real `opencomposer lsp` against streams that break LSP's framing, and its TCP listener
against hostile local connections (finding 8).

Over stdio, a stream that is not a sequence of LSP messages (bad, missing, repeated or huge
Content-Length, a header block without its end, garbage, an end inside a message) ends the
process with status 1 and one readable ERROR line, no traceback, instead of leaving it alive and
out of step; well-framed streams in any number of writes are answered. Over TCP, connections that
do not authenticate (silent, garbage, a wrong token, another request or `exit` first, a browser's
HTTP request, half a header) are closed, by the deadline at the latest, and the real editor still
connects and is served alone.
"""

import contextlib
import json
import os
import random
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.raw_lsp import (
    CLI,
    NO_MODEL,
    WAIT,
    RawClient,
    TcpConnection,
    error,
    initialize_params,
    listen_over_tcp,
)

from opencomposer.agent.protocol.threads import TurnStatus
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.lsp.framing import MAX_MESSAGE_BYTES, frame

SCRIPTED_SERVER = Path(__file__).resolve().parents[1] / "support" / "scripted_lsp_server.py"
BROKEN = "stopping: the client's LSP stream is broken: "
"""How the server's one log line about a broken stream starts."""


def body(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False).encode()


LIST = body({"id": 2, "method": "opencomposer/thread/list", "params": {}})
LISTED = {"jsonrpc": "2.0", "id": 2, "result": {"data": [], "next_cursor": None}}


@dataclass
class Running:
    client: RawClient
    process: subprocess.Popen[bytes]
    stderr: Path

    def stopped_for(self, reason: str) -> str:
        """Assert the process ended as a crash with one ERROR line giving `reason`; the line."""
        assert self.process.wait(WAIT) == 1
        log = self.stderr.read_text()
        assert "Traceback" not in log
        errors = [line for line in log.splitlines() if " ERROR " in line]
        assert len(errors) == 1, log
        assert BROKEN in errors[0] and reason in errors[0], log
        return errors[0]


@pytest.fixture
def start(tmp_path: Path, home: Path) -> Iterator[Callable[..., Running]]:
    """`start(*command)`: a language server over stdio (the real command unless told), its
    stderr in a file. Processes still running after the test are killed."""
    started: list[Running] = []

    def run(*command: str, env: dict[str, str] | None = None) -> Running:
        stderr = tmp_path / f"stderr-{len(started)}.log"
        with stderr.open("wb") as log:
            process = subprocess.Popen(
                list(command or (str(CLI), "lsp", *NO_MODEL)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, "OPENCOMPOSER_HOME": str(home), **(env or {})},
            )
        assert process.stdin is not None and process.stdout is not None
        started.append(Running(RawClient(process.stdout, process.stdin), process, stderr))
        return started[-1]

    yield run
    for running in started:
        if running.process.poll() is None:
            running.process.kill()
        running.process.wait()
        running.client.stop_reading()
        for pipe in (running.process.stdin, running.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


# ---------------------------------------------------------------------- over stdio: broken streams

GARBAGE = random.Random(8).randbytes(4096)

BROKEN_STREAMS = {
    "non-numeric": (b"Content-Length: abc\r\n\r\n" + LIST, "not a decimal number: b'abc'"),
    "negative": (b"Content-Length: -%d\r\n\r\n" % len(LIST) + LIST, "not a decimal number"),
    "zero": (b"Content-Length: 0\r\n\r\n" + frame(LIST), "Content-Length is 0"),
    "missing": (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + LIST,
        "a message without Content-Length",
    ),
    "duplicated": (b"Content-Length: %d\r\n" % len(LIST) + frame(LIST), "2 Content-Length headers"),
    "conflicting": (b"Content-Length: 5\r\n" + frame(LIST), "2 Content-Length headers"),
    "too small": (
        b"Content-Length: %d\r\n\r\n" % (len(LIST) - 10) + LIST + frame(LIST),
        "not an LSP header line",
    ),
    "too large": (b"Content-Length: 1000000000000\r\n\r\n", "is over the limit"),
    "just over the cap": (
        b"Content-Length: %d\r\n\r\n" % (MAX_MESSAGE_BYTES + 1),
        f"is over the limit of {MAX_MESSAGE_BYTES} bytes",
    ),
    "a header without its terminator": (
        b"Content-Length: %d\r\n" % len(LIST) + LIST,
        "not an LSP header line: b'{",
    ),
    "a header line without CR": (
        b"Content-Length: %d\n\n" % len(LIST) + LIST,
        f"not an LSP header line: b'Content-Length: {len(LIST)}\\n'",
    ),
    "a huge header block": (b"X-Pad: " + b"a" * 20_000, "a header block longer than 8192 bytes"),
    "many header lines": (b"X-Pad: a\r\n" * 2000, "a header block longer than 8192 bytes"),
    "binary garbage": (GARBAGE, "not an LSP header line"),
    "an HTTP request": (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + LIST,
        "not an LSP header line: b'POST / HTTP/1.1",
    ),
}


@pytest.mark.parametrize("name", BROKEN_STREAMS)
def test_a_broken_stream_ends_the_server_as_a_crash(start, project, name):
    stream, reason = BROKEN_STREAMS[name]
    running = start()
    assert "result" in running.client.initialize(project)

    running.client.send_raw(stream)

    line = running.stopped_for(reason)
    assert len(line) < 300  # the client's bytes are shown shortened, escaped
    # The cut-short body is well framed: malformed JSON, answered as such.
    assert running.client.until_closed() == ([error(None, -32700)] if name == "too small" else [])


def test_garbage_after_a_valid_message_ends_the_server(start, project):
    running = start()
    client = running.client
    assert "result" in client.initialize(project)
    client.send_body(LIST)
    assert client.receive() == LISTED

    client.send_raw(GARBAGE)

    running.stopped_for("not an LSP header line")
    assert client.until_closed() == []


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        (b"Content-Length: 52\r\n", "the stream ended inside a header block"),
        (
            b"Content-Length: %d\r\n\r\n" % len(LIST) + LIST[:-5],
            f"the stream ended inside a message ({len(LIST) - 5} of {len(LIST)} bytes)",
        ),
    ],
    ids=["inside a header", "inside a body"],
)
def test_a_stream_that_ends_inside_a_message_is_not_read_as_one(start, project, stream, reason):
    running = start()
    assert "result" in running.client.initialize(project)

    running.client.send_raw(stream)
    assert running.process.stdin is not None
    running.process.stdin.close()

    running.stopped_for(reason)
    assert running.client.until_closed() == []


def test_a_broken_stream_interrupts_the_running_turn_and_leaves_the_store_whole(
    start, project, home
):
    script = home.parent / "script.json"
    script.write_text(json.dumps([{"text": "Let me think about this", "hang_after": 1}]))
    running = start(sys.executable, str(SCRIPTED_SERVER), str(script))
    client = running.client
    client.initialize(project)
    thread_id = client.request("opencomposer/thread/start", {"workspace": str(project)})["result"][
        "thread"
    ]["id"]
    client.request(
        "opencomposer/turn/start",
        {"thread_id": thread_id, "input": [{"type": "text", "text": "go"}]},
    )
    client.until_notified(lambda event: event["type"] == "item.delta")  # the model hangs

    client.send_raw(b"Content-Length: -1\r\n\r\n")

    assert running.process.wait(WAIT) == 1
    assert "Traceback" not in running.stderr.read_text()
    store = SQLiteTraceStore(home / "traces.db")
    [turn] = store.turns(thread_id)
    events = store.events(thread_id)
    assert turn.status == TurnStatus.interrupted
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert events[-1].type == "turn.completed"
    store.close()


# ---------------------------------------------------------------------- over stdio: good streams


def test_well_framed_streams_are_answered_however_they_are_written(start, project):
    running = start()
    client = running.client
    assert "result" in client.initialize(project)

    def listing(msg_id: int) -> bytes:
        return body({"id": msg_id, "method": "opencomposer/thread/list", "params": {}})

    client.send_raw(frame(listing(101)) + frame(listing(102)) + frame(listing(103)))  # one write
    assert [client.receive() for _ in range(3)] == [{**LISTED, "id": n} for n in (101, 102, 103)]

    for byte in frame(listing(104)):
        client.send_raw(bytes([byte]))  # one message in many writes
    assert client.receive() == {**LISTED, "id": 104}

    # Content-Length counts bytes: characters of two, three and four bytes in UTF-8.
    client.send_body(
        body(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": (project / "notes.md").as_uri(),
                        "languageId": "markdown",
                        "version": 1,
                        "text": "café 世界 🎉\n" * 100,
                    }
                },
            }
        )
    )
    client.send_body(body({"id": 105, "method": "opencomposer/日本語🎉", "params": {}}))
    assert client.receive() == error(105, -32601)

    for msg_id, head in (
        (
            106,
            b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; "
            b"charset=utf-8\r\n\r\n",
        ),
        (
            107,
            b"Content-Type: application/vscode-jsonrpc; charset=utf8\r\n"
            b"content-length: %d\r\nX-Unknown: yes\r\n\r\n",
        ),
    ):
        client.send_raw(head % len(listing(msg_id)) + listing(msg_id))
        assert client.receive() == {**LISTED, "id": msg_id}

    assert client.request("shutdown") == {"jsonrpc": "2.0", "id": 2, "result": None}
    client.notify("exit")
    assert running.process.wait(WAIT) == 0
    assert "Traceback" not in running.stderr.read_text()


# ---------------------------------------------------------------------- over TCP

TOKEN = "the-real-token"


@pytest.fixture
def tcp_server(home: Path, tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes], Path]]:
    stderr = tmp_path / "tcp-stderr.log"
    port, process = listen_over_tcp(home, stderr, TOKEN)
    yield port, process, stderr
    if process.poll() is None:
        process.kill()
    process.wait()


def request(method: str, params: Any, msg_id: int = 1) -> bytes:
    return frame(body({"id": msg_id, "method": method, "params": params}))


def serve_the_real_editor(port: int, project: Path, process: subprocess.Popen[bytes]) -> None:
    """The editor connects with the token, is served, and ends the process as it should."""
    editor = TcpConnection(port)
    client = editor.client
    assert (
        client.initialize(project, initializationOptions={"token": TOKEN})["result"]["serverInfo"][
            "name"
        ]
        == "opencomposer"
    )
    assert client.request("opencomposer/thread/list", {}) == LISTED
    assert client.request("shutdown") == {"jsonrpc": "2.0", "id": 3, "result": None}
    client.notify("exit")
    assert process.wait(WAIT) == 0
    editor.close()


HOSTILE = {
    "garbage": (GARBAGE, []),
    "a wrong token": (
        request("initialize", initialize_params(initializationOptions={"token": TOKEN[:-1]})),
        [
            error(
                1,
                -32803,
                "a valid token is required in initializationOptions.token",
                data={"kind": "unauthorized"},
            )
        ],
    ),
    "another request first": (
        request("opencomposer/thread/list", {}),
        [error(1, -32002, "opencomposer/thread/list before initialize")],
    ),
    "exit first": (frame(body({"method": "exit"})), []),
    "a browser's HTTP request": (
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\r\n"
        + request("initialize", initialize_params()),
        [],
    ),
    "too big an initialize": (b"Content-Length: 300000\r\n\r\n", []),
    "a framing error": (b"Content-Length: -1\r\n\r\n", []),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_connection_is_closed_and_the_editor_still_served(tcp_server, project, name):
    port, process, stderr = tcp_server
    sent, replies = HOSTILE[name]
    hostile = TcpConnection(port)

    hostile.socket.sendall(sent)

    assert hostile.client.until_closed() == replies
    hostile.close()
    assert process.poll() is None
    serve_the_real_editor(port, project, process)
    log = stderr.read_text()
    assert log.count("refused an LSP connection") == 1 and "Traceback" not in log


def test_connections_that_never_authenticate_are_closed_at_the_deadline(tcp_server, project):
    port, process, stderr = tcp_server
    silent = TcpConnection(port)
    half_header = TcpConnection(port)
    half_header.socket.sendall(b"Content-Length: 60\r\nContent-Ty")
    half_body = TcpConnection(port)
    half_body.socket.sendall(
        request("initialize", initialize_params(initializationOptions={"token": TOKEN}))[:-3]
    )

    for hostile in (silent, half_header, half_body):
        assert hostile.client.until_closed() == []  # at the 10 s deadline
        hostile.close()

    assert process.poll() is None
    serve_the_real_editor(port, project, process)
    assert stderr.read_text().count("no initialize within 10 s") == 3


def test_a_stranger_still_authenticating_is_closed_when_the_editor_is_let_in(tcp_server, project):
    port, process, _ = tcp_server
    stranger = TcpConnection(port)
    exit_notification = frame(body({"method": "exit"}))
    stranger.socket.sendall(exit_notification[:-1])  # all but the last byte, for later
    editor = TcpConnection(port)
    client = editor.client
    assert client.initialize(project, initializationOptions={"token": TOKEN})["result"]

    assert stranger.client.until_closed() == []
    with contextlib.suppress(OSError):  # the stranger finishes its `exit`: it reaches nobody
        stranger.socket.sendall(exit_notification[-1:] + exit_notification)
    stranger.close()
    assert client.request("opencomposer/thread/list", {}) == LISTED
    with pytest.raises(ConnectionRefusedError):  # one client at a time
        socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    client.request("shutdown")
    client.notify("exit")
    assert process.wait(WAIT) == 0
    editor.close()


def test_a_broken_stream_from_the_editor_ends_the_server_over_tcp_too(tcp_server, project):
    port, process, stderr = tcp_server
    editor = TcpConnection(port)
    assert editor.client.initialize(project, initializationOptions={"token": TOKEN})["result"]

    editor.socket.sendall(b"Content-Length: 1000000000000\r\n\r\n")

    assert process.wait(WAIT) == 1
    log = stderr.read_text()
    assert BROKEN + "Content-Length b'1000000000000' is over the limit" in log
    assert "Traceback" not in log
    editor.close()
