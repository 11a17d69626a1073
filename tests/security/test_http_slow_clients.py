"""Slow, idle and numerous clients hold nothing a token holder needs (issue 31, class 8), against
`opencomposer serve` as a real process.

A request head must come whole within `server.header_timeout` however it is sent (nothing,
half a line, headers without their end, a byte at a time, a second request on a kept-alive
connection); a body within `server.body_timeout` (stalled, trickled, chunked forever); a
kept-alive connection closes after `server.idle_timeout`, whoever it belongs to. Thousands of
connections without the token, silent, half-sent or kept alive after an answer, neither lock
out a token holder nor exhaust the server's file descriptors at a desktop's limit (1,024),
and the token holder's own connections, kept alive or streaming, are not closed for them.
A turn's event stream, silent for longer than every timeout, is not cut. The language server's
TCP listener, which lets one editor in, is not kept from it by held connections either. The
timeouts are set short here; every wait has a generous bound and nothing asserts speed.
"""

import contextlib
import json
import os
import resource
import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.fake_openai import Compose, ThreadedFakeOpenAI
from support.raw_lsp import TcpConnection, listen_over_tcp
from support.serve_process import Served, serving

BOUND = 30.0
"""The longest any wait here may take: generous, a bound and not a speed."""

SHORT = ("header_timeout=1", "idle_timeout=1", "body_timeout=1")

LSP_TOKEN = "the-editors-token"


def settings(*assignments: str) -> list[str]:
    return [arg for assignment in assignments for arg in ("-c", f"server.{assignment}")]


@pytest.fixture(scope="module")
def served_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's server's HOME, which is its workspace root (the suite's isolated HOME is
    per test, and so too late for a module's server)."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def served(served_home: Path) -> Iterator[Served]:
    """One server with short timeouts for the tests that only talk to it."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(served_home))
        env.setenv("XDG_DATA_HOME", str(served_home / ".local/share"))
        env.setenv("XDG_CONFIG_HOME", str(served_home / ".config"))
        with serving(*settings(*SHORT)) as server:
            assert server.get("/healthz").status_code == 200  # started, engine and all
            yield server


# ---------------------------------------------------------------------- raw HTTP


def port(server: Served) -> int:
    return int(server.url.rsplit(":", 1)[1])


def connect(server: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port(server)), timeout=BOUND)


def paced(count: int) -> Iterator[int]:
    """range(count), a millisecond apart: a client that connects faster than the server
    accepts has its SYNs dropped when the listen queue is full, each costing a second's wait
    for the retry (the floods here test holding connections, not racing the server)."""
    for number in range(count):
        time.sleep(0.001)
        yield number


def head(method: str, path: str, token: str | None, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *extra]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection, which must happen within
    BOUND."""
    received = b""
    sock.settimeout(BOUND)
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        pytest.fail(f"still open after {BOUND:g} s; received {received[:200]!r}")
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return received


def response(sock: socket.socket) -> tuple[int, bytes]:
    """One response read off a kept-alive connection: its status and body."""
    sock.settimeout(BOUND)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    raw_head, body = data.split(b"\r\n\r\n", 1)
    lines = raw_head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return int(lines[0].split()[1]), body


def trickle(sock: socket.socket, data: bytes, interval: float) -> None:
    """Send `data` a byte at a time, `interval` seconds apart, until it is all sent or the
    server answers or closes."""
    for byte in data:
        if select.select([sock], [], [], interval)[0]:
            return
        try:
            sock.send(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return


def timed_out(answer: bytes) -> bool:
    """A 408 whose body says which setting ran out, in the agent API's error shape."""
    status, _, body = answer.partition(b"\r\n\r\n")
    return status.startswith(b"HTTP/1.1 408") and json.loads(body)["error"]["kind"] == "timeout"


def still_serves(server: Served) -> None:
    assert server.get("/v1/threads", server.token).status_code == 200


# ---------------------------------------------------------------------- the request head


def test_a_connection_that_sends_nothing_is_closed(served):
    assert until_closed(connect(served)) == b""
    still_serves(served)


@pytest.mark.parametrize(
    "part",
    [
        b"GET /v1/thr",
        b"GET /v1/threads HTTP/1.1\r\nHost: 127.0.0.1\r\n",
        b"POST /v1/threads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\nX-A: b",
    ],
    ids=["half a request line", "headers without their end", "half a header"],
)
def test_a_head_that_stops_halfway_gets_408(served, part):
    sock = connect(served)
    sock.sendall(part)
    answer = until_closed(sock)
    assert timed_out(answer), answer
    assert b"server.header_timeout" in answer
    still_serves(served)


def test_a_head_sent_a_byte_at_a_time_gets_408_though_every_byte_is_prompt(served):
    sock = connect(served)
    trickle(sock, head("GET", "/v1/threads", served.token), 0.2)  # ~25 s for the whole head
    assert timed_out(until_closed(sock))
    still_serves(served)


def test_a_second_request_on_a_kept_alive_connection_has_the_same_deadline(served):
    sock = connect(served)
    sock.sendall(head("GET", "/v1/threads", served.token))
    assert response(sock)[0] == 200
    sock.sendall(b"GET /v1/threads HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriz")
    assert timed_out(until_closed(sock))


def test_a_head_too_big_to_be_one_is_refused_at_once(served):
    """h11 holds at most 16 KiB of an unfinished head: a client cannot fill the server's
    memory with one that never ends."""
    sock = connect(served)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Pad: " + b"a" * 20_000)
    assert until_closed(sock).startswith(b"HTTP/1.1 400")
    still_serves(served)


# ---------------------------------------------------------------------- the request body


def body_request(served: Served, *headers: str) -> socket.socket:
    sock = connect(served)
    sock.sendall(
        head("POST", "/v1/threads", served.token, "Content-Type: application/json", *headers)
    )
    return sock


def test_a_body_that_stalls_gets_408(served):
    sock = body_request(served, "Content-Length: 100")
    sock.sendall(b'{"workspace": ')
    answer = until_closed(sock)
    assert timed_out(answer) and b"server.body_timeout" in answer
    still_serves(served)


def test_a_body_trickled_below_the_minimum_rate_gets_408(served):
    sock = body_request(served, "Content-Length: 1000")
    trickle(sock, b" " * 1000, 0.1)  # 10 bytes a second, for 100 s if it were let
    assert timed_out(until_closed(sock))
    still_serves(served)


def test_a_chunked_body_that_never_ends_gets_408(served):
    sock = body_request(served, "Transfer-Encoding: chunked")
    for _ in range(int(BOUND / 0.2)):
        if select.select([sock], [], [], 0.2)[0]:
            break
        sock.sendall(b"1\r\n \r\n")  # a chunk of one space, five times a second
    assert timed_out(until_closed(sock))
    still_serves(served)


def test_a_slow_body_without_the_token_is_refused_unread_and_the_connection_closed(served):
    sock = connect(served)
    sock.sendall(head("POST", "/v1/threads", None, "Content-Length: 1000"))
    assert response(sock)[0] == 401
    trickle(sock, b" " * 1000, 0.1)
    until_closed(sock)  # at the deadline of the next head, however the body trickles


def test_a_body_sent_at_once_is_served(served, served_home):
    workspace = served_home / "project"
    workspace.mkdir(exist_ok=True)
    payload = json.dumps({"workspace": str(workspace)}).encode()
    sock = body_request(served, f"Content-Length: {len(payload)}")
    sock.sendall(payload)
    status, body = response(sock)
    sock.close()
    assert status == 200, body


# ---------------------------------------------------------------------- kept-alive connections


@pytest.mark.parametrize(
    ("path", "with_token", "status"),
    [("/v1/threads", True, 200), ("/v1/threads", False, 401), ("/healthz", False, 200)],
    ids=["authenticated", "refused", "public"],
)
def test_an_idle_kept_alive_connection_is_closed(served, path, with_token, status):
    sock = connect(served)
    for _ in range(2):  # kept alive: a second request on it is answered
        sock.sendall(head("GET", path, served.token if with_token else None))
        assert response(sock)[0] == status
    assert until_closed(sock) == b""  # then nothing comes, and it closes


# ---------------------------------------------------------------------- many connections


def raise_own_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs {needed} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))


@contextmanager
def children_fd_limit(limit: int) -> Iterator[None]:
    """Processes started inside the block get `limit` as their soft limit of open files (a
    desktop session's is 1,024), the one the review's attack exhausted."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_files(served: Served) -> int:
    return len(os.listdir(f"/proc/{served.proc.pid}/fd"))


@contextmanager
def strangers(served: Served, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections without the token, a quarter of each kind: silent, half a head,
    and kept alive after a 401 or after the public health probe."""
    kinds = [
        b"",
        b"GET /v1/threads HTTP/1.1\r\nHost: 127.0.0.1\r\n",
        head("GET", "/v1/threads", None),
        head("GET", "/healthz", None),
    ]
    opened = []
    try:
        for number in paced(count):
            sock = connect(served)
            opened.append(sock)
            # Some are closed at once, to make room for later ones.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(kinds[number % 4])
        yield opened
    finally:
        for sock in opened:
            sock.close()


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0)
    try:
        while sock.recv(65536):  # skip what was answered before
            pass
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    return True


@pytest.mark.slow  # ~40 s: connecting 2,600 times to a server that sheds as they come
def test_idle_connections_without_the_token_lock_no_token_holder_out():
    """The review's attack: at a desktop's limit of 1,024 open files, 1,100 idle connections
    made every client wait forever. The timeouts are long here, so only the cap can help; the
    strangers are of every kind (see `strangers`)."""
    raise_own_fd_limit(6_000)
    long = settings("header_timeout=600", "idle_timeout=600")
    quiet = ("-c", "logging.level=WARNING")  # no log line per request: stderr is a pipe
    with ExitStack() as stack:
        with children_fd_limit(1024):
            served = stack.enter_context(serving(*long, *quiet))
        assert served.get("/healthz").status_code == 200
        mine = connect(served)  # the token holder's kept-alive connection
        mine.sendall(head("GET", "/v1/threads", served.token))
        assert response(mine)[0] == 200

        held = stack.enter_context(strangers(served, 1_100))
        for _ in range(3):  # new connections of a token holder are served
            assert served.get("/v1/threads", served.token).status_code == 200
        mine.sendall(head("GET", "/v1/threads", served.token))  # and its own is still open
        assert response(mine)[0] == 200
        assert closed_by_server(held[0])  # the strangers open longest made room
        assert not closed_by_server(held[-1])

        stack.enter_context(strangers(served, 1_500))  # a burst of 1,500 more
        assert served.get("/v1/threads", served.token).status_code == 200
        assert open_files(served) < 1024
        mine.close()
    assert "Too many open files" not in served.proc.stderr.read()


def test_a_token_holders_streams_are_not_closed_for_newcomers():
    """At a cap of 2 with two turns streaming, a newcomer is told the server is busy rather
    than either stream being cut; the streams end whole."""
    raise_own_fd_limit(1_000)
    workspace = Path(os.environ["HOME"]) / "project"
    workspace.mkdir()
    with ThreadedFakeOpenAI() as upstream:
        upstream.enqueue(*(Compose(text="slow and steady", delay=0.5) for _ in range(2)))
        engine = ("--engine", f"openai:{upstream.base_url}")
        with serving(*engine, *settings("max_connections=2")) as served:
            auth = {"Authorization": f"Bearer {served.token}"}
            with httpx.Client(base_url=served.url, headers=auth, timeout=BOUND) as http:
                threads = [
                    http.post("/v1/threads", json={"workspace": str(workspace)}).json()["thread"]
                    for _ in range(2)
                ]
            streams = [start_turn(served, thread["id"]) for thread in threads]
            with strangers(served, 20):
                pass
            sock = connect(served)
            sock.sendall(head("GET", "/v1/threads", served.token))
            answer = until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 503") and b"server.max_connections" in answer
            for stream in streams:
                assert answer_of(stream) == "slow and steady"
            still_serves(served)


# ---------------------------------------------------------------------- long streams


@dataclass
class Stream:
    """A turn's SSE stream on a raw socket, its response head already read (by then the
    turn runs and the connection has authenticated)."""

    sock: socket.socket
    data: bytes


def start_turn(served: Served, thread_id: str) -> Stream:
    payload = json.dumps({"input": [{"type": "text", "text": "go"}]}).encode()
    sock = connect(served)
    sock.sendall(
        head(
            "POST",
            f"/v1/threads/{thread_id}/turns",
            served.token,
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
        )
        + payload
    )
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data
    return Stream(sock, data)


def dechunked(body: bytes) -> bytes:
    """A chunked HTTP body (`Transfer-Encoding: chunked`, how a stream is sent) as sent."""
    out = b""
    while True:
        size, _, rest = body.partition(b"\r\n")
        length = int(size, 16)
        if length == 0:
            return out
        out += rest[:length]
        body = rest[length + 2 :]


def answer_of(stream: Stream) -> str:
    """The agent's answer in a turn's SSE stream, read to its last chunk: the turn completed,
    and what it said."""
    data = stream.data
    stream.sock.settimeout(BOUND)
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = stream.sock.recv(65536)
        assert chunk, f"the stream was cut: {data[-300:]!r}"
        data += chunk
    stream.sock.close()
    sse = dechunked(data.split(b"\r\n\r\n", 1)[1]).decode()
    events = [json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: ")]
    assert events[-1]["turn"]["status"] == "completed", events[-1]
    return "".join(e["delta"].get("text", "") for e in events if e["type"] == "item.delta")


def test_a_turn_stream_silent_longer_than_every_timeout_is_not_cut():
    workspace = Path(os.environ["HOME"]) / "project"
    workspace.mkdir()
    text = "a slow answer, in pieces"
    with ThreadedFakeOpenAI() as upstream:
        upstream.enqueue(Compose(text=text, delay=1.5))  # ~10 s, silent 1.5 s at a time
        engine = ("--engine", f"openai:{upstream.base_url}")
        short = settings("header_timeout=0.5", "idle_timeout=0.5", "body_timeout=0.5")
        with serving(*engine, *short) as served:
            auth = {"Authorization": f"Bearer {served.token}"}
            made = httpx.post(
                f"{served.url}/v1/threads",
                json={"workspace": str(workspace)},
                headers=auth,
                timeout=BOUND,
            )
            thread_id = made.json()["thread"]["id"]
            started = time.monotonic()
            assert answer_of(start_turn(served, thread_id)) == text
            assert time.monotonic() - started > 3 * 0.5  # it did outlast the timeouts


# ---------------------------------------------------------------------- the LSP listener


@pytest.mark.slow  # ~20 s: connecting 600 times to a listener that logs each it sheds
def test_held_connections_keep_no_editor_out_of_the_lsp_listener(home, project, tmp_path):
    """`opencomposer lsp --tcp` at 512 open files, with 600 connections held that never
    authenticate: the editor is let in and accept() never runs out of descriptors (the oldest
    strangers are closed to make room, each saying why in the log)."""
    raise_own_fd_limit(4_000)
    stderr = tmp_path / "lsp-stderr.log"
    with children_fd_limit(512):
        lsp_port, process = listen_over_tcp(home, stderr, LSP_TOKEN)
    held = []
    # The test client reads with select(), which takes descriptors below 1,024 only: one is
    # kept free for the editor's socket (a new descriptor is the lowest free one), in case
    # this process had many open already.
    spare = os.open(os.devnull, os.O_RDONLY)
    try:
        for _ in paced(600):
            held.append(socket.create_connection(("127.0.0.1", lsp_port), timeout=BOUND))
        os.close(spare)
        editor = TcpConnection(lsp_port)
        reply = editor.client.initialize(project, initializationOptions={"token": LSP_TOKEN})
        assert reply["result"]["serverInfo"]["name"] == "opencomposer"
        editor.client.request("shutdown")
        editor.client.notify("exit")
        assert process.wait(BOUND) == 0
        editor.close()
    finally:
        for sock in held:
            sock.close()
        if process.poll() is None:
            process.kill()
            process.wait()
    log = stderr.read_text()
    assert "newer connections were authenticating" in log
    assert "out of system resource" not in log and "Too many open files" not in log
