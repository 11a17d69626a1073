"""Input that used to crash a route (500) is a 400 with a clear message: lone surrogates
(`"\\udc80"`, which no UTF-8 text can hold) anywhere in a JSON body, numbers past SQLite's
64-bit range in query strings, bodies and headers, digits `int()` refuses, JSON's non-standard
`NaN`; and the server keeps serving."""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine

from opencomposer.agent.protocol.methods import MAX_SEQ

JSON = {"Content-Type": "application/json"}
HUGE = "99999999999999999999999"


@dataclass
class Server:
    url: str
    workspace: Path
    thread: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("inputs")
    workspace = root / "ws"
    workspace.mkdir()
    engine = ScriptedEngine([Reply(text="ok") for _ in range(50)])
    with live_server(engine, root / "home") as url:
        made = httpx.post(f"{url}/v1/threads", json={"workspace": str(workspace)}, timeout=10)
        yield Server(url, workspace, made.json()["thread"]["id"])


def bodies(server: Server) -> list[tuple[str, bytes]]:
    """(path, raw JSON body) with a lone surrogate or a non-standard number somewhere."""
    ws = str(server.workspace)
    thread = f"/v1/threads/{server.thread}"
    cases = [
        ("/v1/threads", '{"workspace": "\\udc80"}'),
        ("/v1/threads", f'{{"workspace": "{ws}/\\udc80"}}'),
        ("/v1/threads", f'{{"workspace": "{ws}", "title": "a\\ud800b"}}'),
        ("/v1/threads", f'{{"workspace": "{ws}", "model": "\\udfff"}}'),
        ("/v1/threads", f'{{"workspace": "{ws}", "\\udc80": 1}}'),  # in a key
        (f"{thread}/turns", '{"input": [{"type": "text", "text": "hi \\udc80"}]}'),
        (
            f"{thread}/turns",
            '{"input": [{"type": "text", "text": "x"}], "cancel_on_disconnect": NaN}',
        ),
        (f"{thread}/undo", '{"scope": "turn", "turn_id": "\\udc80"}'),
        (f"{thread}/approvals/x", '{"decision": "deny", "message": "\\udc80"}'),
        ("/v1/chat/completions", '{"model": "\\udc80", "messages": []}'),
        (
            "/v1/chat/completions",
            '{"model": "scripted-model", "messages": [{"role": "user", "content": "\\udc80"}]}',
        ),
        (
            "/v1/chat/completions",
            '{"model": "scripted-model", "messages": [], "temperature": Infinity}',
        ),
        ("/v1/completions", '{"model": "scripted-model", "prompt": "\\udc80"}'),
    ]
    encoded_surrogate = ("/v1/threads", b'{"workspace": "\xed\xb2\x80"}')
    return [(path, body.encode()) for path, body in cases] + [encoded_surrogate]


def test_lone_surrogates_and_non_standard_numbers_in_bodies_are_400s(server: Server) -> None:
    for path, body in bodies(server):
        response = httpx.post(f"{server.url}{path}", content=body, headers=JSON, timeout=10)
        assert response.status_code == 400, (path, body, response.text)
        error = response.json()["error"]
        assert "not valid JSON" in error["message"], (path, error)
    threads = httpx.get(f"{server.url}/v1/threads", timeout=10).json()["data"]
    assert [t["id"] for t in threads] == [server.thread]
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


@pytest.mark.parametrize("path", ["/events", "/events/stream"])
@pytest.mark.parametrize(
    "query",
    [
        f"after_seq={HUGE}",
        f"after_seq={MAX_SEQ + 1}",
        "after_seq=-1",
        "after_seq=" + "9" * 5000,
        "after_seq=1e3",
        "after_seq=%C2%B2",
    ],
)
def test_out_of_range_seqs_in_query_strings_are_400s(server: Server, path: str, query: str) -> None:
    response = httpx.get(f"{server.url}/v1/threads/{server.thread}{path}?{query}", timeout=10)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["kind"] == "invalid_request"


@pytest.mark.parametrize("path", ["/v1/threads", "/v1/threads/{thread}/events"])
@pytest.mark.parametrize("limit", [HUGE, "0", "-1", "9" * 5000])
def test_out_of_range_limits_are_400s(server: Server, path: str, limit: str) -> None:
    response = httpx.get(
        f"{server.url}{path.format(thread=server.thread)}?limit={limit}", timeout=10
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["kind"] == "invalid_request"


def test_the_largest_seq_is_accepted(server: Server) -> None:
    events = httpx.get(
        f"{server.url}/v1/threads/{server.thread}/events?after_seq={MAX_SEQ}", timeout=10
    )
    assert events.status_code == 200 and events.json()["events"] == []


@pytest.mark.parametrize(
    "value", [HUGE, str(MAX_SEQ + 1), "9" * 5000, "\xb2", "\xb9\xb2", "-1", "1.5", "1 2"]
)
def test_a_bad_last_event_id_is_a_400(server: Server, value: str) -> None:
    response = httpx.get(
        f"{server.url}/v1/threads/{server.thread}/events/stream",
        timeout=10,
        headers={"Last-Event-ID": value.encode("latin-1")},
    )
    assert response.status_code == 400, (value, response.text)
    assert "Last-Event-ID" in response.json()["error"]["message"]


def test_numbers_past_64_bits_in_bodies_are_400s(server: Server) -> None:
    for path, body in [
        (
            "/v1/chat/completions",
            f'{{"model": "scripted-model", "messages": [], "max_tokens": {HUGE}}}',
        ),
        (
            "/v1/chat/completions",
            f'{{"model": "scripted-model", "messages": '
            f'[{{"role": "user", "content": "hi"}}], "seed": {HUGE}}}',
        ),
        ("/v1/completions", f'{{"model": "scripted-model", "prompt": "x", "n": {HUGE}}}'),
        (
            "/v1/completions",
            f'{{"model": "scripted-model", "prompt": "x", "max_tokens": {"9" * 5000}}}',
        ),
    ]:
        response = httpx.post(f"{server.url}{path}", content=body, headers=JSON, timeout=10)
        assert response.status_code == 400, (path, body[:200], response.text)
