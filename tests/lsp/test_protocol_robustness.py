"""The language server against clients that misbehave, spoken to in raw JSON-RPC (a client
library would refuse to send most of this): requests before `initialize` or after `shutdown`,
unreadable messages, unknown methods and params of the wrong shape all get the error the spec
asks for, and the server keeps serving. A client that goes away mid-turn leaves the turn closed
as interrupted in the trace store and no background job behind; over TCP only the client with
the token is served, and only that one connection. Streams that break LSP's framing, and hostile
TCP connections, are in tests/security/test_lsp_framing.py.
"""

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.raw_lsp import (
    CLI,
    WAIT,
    RawClient,
    TcpConnection,
    error,
    initialize_params,
    listen_over_tcp,
)

from opencomposer.agent.protocol.items import ItemStatus
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.lsp.server import protocol_capabilities

SERVER = Path(__file__).resolve().parents[1] / "support" / "scripted_lsp_server.py"


@pytest.fixture
def start_server(tmp_path: Path, home: Path) -> Iterator[Any]:
    """`start_server(*replies, env=...)`: the scripted server over stdio, as a RawClient and
    its process. Processes still running after the test are killed."""
    started: list[tuple[RawClient, subprocess.Popen[bytes]]] = []

    def start(
        *replies: dict[str, Any], env: dict[str, str] | None = None
    ) -> tuple[RawClient, subprocess.Popen[bytes]]:
        script = tmp_path / "script.json"
        script.write_text(json.dumps(list(replies)))
        process = subprocess.Popen(
            [sys.executable, str(SERVER), str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "OPENCOMPOSER_HOME": str(home), **(env or {})},
        )
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


def test_requests_before_initialize_are_refused_and_initialize_still_works(start_server, project):
    client, _ = start_server()
    position = {
        "textDocument": {"uri": (project / "app.py").as_uri()},
        "position": {"line": 0, "character": 0},
    }

    assert client.request("textDocument/hover", position) == error(
        1, -32002, "textDocument/hover before initialize"
    )
    # A notification gets no answer, not even an error: the next message answers request 2.
    client.notify(
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": (project / "app.py").as_uri(),
                "languageId": "python",
                "version": 1,
                "text": "x",
            }
        },
    )
    assert client.request("opencomposer/thread/list", {}) == error(
        2, -32002, "opencomposer/thread/list before initialize"
    )

    assert client.initialize(project)["result"]["serverInfo"]["name"] == "opencomposer"
    assert client.request("opencomposer/thread/list", {}) == {
        "jsonrpc": "2.0",
        "id": 4,
        "result": {"data": [], "next_cursor": None},
    }


def test_a_second_initialize_is_refused(start_server, project):
    client, _ = start_server()
    client.initialize(project)

    assert client.initialize(project) == error(2, -32600, "initialize was already sent")
    assert "result" in client.request("opencomposer/thread/list", {})


def test_shutdown_refuses_further_requests_and_exit_ends_the_process_with_0(start_server, project):
    client, process = start_server()
    client.initialize(project)

    assert client.request("shutdown") == {"jsonrpc": "2.0", "id": 2, "result": None}
    assert client.request("opencomposer/thread/list", {}) == error(
        3, -32600, "opencomposer/thread/list after shutdown"
    )
    client.notify("exit")

    # stdin stays open: the server ends because it was told to, not because its input did.
    assert process.wait(WAIT) == 0


def test_exit_without_shutdown_ends_the_process_with_1(start_server, project):
    client, process = start_server()
    client.initialize(project)

    client.notify("exit")

    assert process.wait(WAIT) == 1


# ---------------------------------------------------------------------- unreadable messages


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "method": ', -32700),  # cut short
        (b"{'jsonrpc': '2.0'}", -32700),
        (b'{"jsonrpc": "2.0", "id": 7, "method": "\xff"}', -32700),  # not UTF-8
        (b"[" * 100_000, -32700),  # nested deeper than Python's recursion limit
        (b'{"jsonrpc": "2.0", "id": ' + b"9" * 5000 + b"}", -32700),  # over int()'s 4300 digits
        (b"[1, 2]", -32600),
        (b'"initialize"', -32600),
        (b'{"jsonrpc": "2.0"}', -32600),
        (b'{"id": 8, "method": "shutdown"}', -32600),  # no "jsonrpc"
        (b'{"jsonrpc": "2.0", "id": 9}', -32600),  # a reply to nothing, without a result
    ],
)
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
        4, -32602, data={"kind": "invalid_request"}
    )
    assert client.request("opencomposer/turn/start", {"thread_id": 5, "input": []}) == error(
        5, -32602, data={"kind": "invalid_request"}
    )
    # ...and by commands.
    assert client.request("workspace/executeCommand", {"command": "opencomposer.ask"}) == error(
        6, -32602
    )
    assert client.request(
        "workspace/executeCommand",
        {"command": "opencomposer.completion.accepted", "arguments": [{"id": 1}]},
    ) == error(7, -32602, "completion telemetry takes the completion id")
    # A notification is never answered: the next message answers request 8.
    client.notify("textDocument/didOpen", {"textDocument": 3})
    assert client.request("opencomposer/thread/list", {}) == {
        "jsonrpc": "2.0",
        "id": 8,
        "result": {"data": [], "next_cursor": None},
    }


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
    start_server, project, home, tmp_path, how
):
    pid_file = project / "job.pid"
    client, process = start_server(
        {
            "calls": [
                [
                    "run_terminal",
                    {"command": f"echo $$ > {pid_file}; exec sleep 600", "background": True},
                ]
            ]
        },
        {"text": "Let me think about this", "hang_after": 1},
        env={
            "PATH": f"{fake_bwrap(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
            "OPENCOMPOSER_AGENT__APPROVAL__DANGEROUS": "auto",
        },
    )
    client.initialize(project)
    thread = client.request("opencomposer/thread/start", {"workspace": str(project)})
    thread_id = thread["result"]["thread"]["id"]
    client.request(
        "opencomposer/turn/start",
        {"thread_id": thread_id, "input": [{"type": "text", "text": "go"}]},
    )
    # The model has streamed its first words and hangs.
    delta = client.until_notified(
        lambda event: event["type"] == "item.delta" and event["delta"]["kind"] == "text"
    )["params"]["delta"]
    job = int(pid_file.read_text())
    assert running(job)

    client.stop_reading()
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    if how == "both pipes closed":  # as when the editor is killed: writes fail too
        process.stdout.close()

    assert process.wait(WAIT) == 0
    store = SQLiteTraceStore(home / "traces.db")
    [turn] = store.turns(thread_id)
    events = store.events(thread_id)
    assert (turn.status, turn.stop_reason) == (TurnStatus.interrupted, StopReason.interrupted)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert (events[0].type, events[-1].type) == ("thread.started", "turn.completed")
    assert [item.status for item in turn.items] == [
        ItemStatus.completed,
        ItemStatus.completed,
        ItemStatus.interrupted,
    ]
    assert turn.items[-1].text == delta["text"]  # what the model wrote before the client left
    store.close()
    assert not running(job)


# ---------------------------------------------------------------------- the real command


@pytest.fixture
def tcp_server(home: Path, tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`opencomposer lsp --tcp PORT` with the token "secret", once it listens."""
    port, process = listen_over_tcp(home, tmp_path / "stderr.log", "secret")
    yield port, process
    if process.poll() is None:
        process.kill()
    process.wait()


def unauthorized(msg_id: int) -> dict[str, Any]:
    return error(
        msg_id,
        -32803,
        "a valid token is required in initializationOptions.token",
        data={"kind": "unauthorized"},
    )


@pytest.mark.parametrize(
    "options",
    [{}, {"initializationOptions": {"token": "secrets"}}],
    ids=["no token", "a wrong token"],
)
def test_over_tcp_a_connection_without_the_token_is_told_and_closed(tcp_server, project, options):
    port, process = tcp_server
    connection = TcpConnection(port)

    connection.client.send(
        {"id": 1, "method": "initialize", "params": initialize_params(project, **options)}
    )

    assert connection.client.until_closed() == [unauthorized(1)]
    connection.close()
    assert process.poll() is None  # the listener goes on: see tests/security


def test_over_tcp_only_the_client_with_the_token_is_served(tcp_server, project):
    port, process = tcp_server
    connection = TcpConnection(port)
    client = connection.client

    assert client.initialize(project, initializationOptions={"token": "secret"})["result"]
    assert client.request("opencomposer/thread/list", {})["result"] == {
        "data": [],
        "next_cursor": None,
    }

    # One connection per server: another local user cannot ride on this one's token.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT)

    assert client.request("shutdown") == {"jsonrpc": "2.0", "id": 3, "result": None}
    client.notify("exit")
    assert process.wait(WAIT) == 0
    connection.close()


def test_over_tcp_a_port_in_use_is_a_one_line_error(home):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(CLI), "lsp", "--tcp", str(port), "-c", "server.token=secret"],
            capture_output=True,
            timeout=WAIT,
            env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
        )

    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr.decode()
    assert b"Traceback" not in done.stderr


def test_check_prints_the_advertised_capabilities(home):
    done = subprocess.run(
        [str(CLI), "lsp", "--check"],
        capture_output=True,
        check=True,
        env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
        timeout=WAIT,
    )

    capabilities = json.loads(done.stdout)
    assert capabilities["inlineCompletionProvider"] == {}
    assert capabilities["positionEncoding"] == "utf-16"
    assert capabilities["experimental"] == protocol_capabilities()
    assert set(capabilities["executeCommandProvider"]["commands"]) == set(
        protocol_capabilities()["opencomposer"]["commands"]
    )
