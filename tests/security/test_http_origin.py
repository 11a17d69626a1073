"""The HTTP server's front door against a real uvicorn server, with raw httpx requests: a Host
that does not name this machine (DNS rebinding), a foreign Origin or a cross-site fetch, a
body a browser could send cross-site without a preflight, and a missing or misplaced token
are all refused before any route runs, and nothing is created; the legitimate spellings
pass, and the official `openai` client works with the token as its api_key."""

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine

TOKEN = "front-door-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Server:
    url: str
    port: int
    workspace: Path
    thread: str
    """A thread made legitimately, which the attacks try to start turns in."""

    client: httpx.Client

    def get(self, path: str, **headers: str) -> httpx.Response:
        return self.client.get(f"{self.url}{path}", headers={**AUTH, **headers})

    def post(self, path: str, body: object, **headers: str) -> httpx.Response:
        return self.client.post(f"{self.url}{path}", json=body, headers={**AUTH, **headers})

    def state(self) -> tuple[list[str], list[list[dict]], bytes]:
        """Every thread's id and turns, and the whole trace export: what an attack may not
        change."""
        threads = [t["id"] for t in self.get("/v1/threads?limit=500").json()["data"]]
        turns = [self.get(f"/v1/threads/{t}").json()["turns"] for t in threads]
        return threads, turns, self.get("/v1/traces/export").content


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("front-door")
    workspace = root / "ws"
    workspace.mkdir()
    engine = ScriptedEngine([Reply(text="hello") for _ in range(20)])
    with live_server(
        engine,
        root / "home",
        token=TOKEN,
        allowed_hosts=["proxy.example"],
        allowed_origins=["https://proxy.example"],
    ) as url:
        port = int(url.rsplit(":", 1)[1])
        made = httpx.post(
            f"{url}/v1/threads", json={"workspace": str(workspace)}, headers=AUTH, timeout=10
        )
        assert made.status_code == 200, made.text
        with httpx.Client(timeout=10) as client:
            yield Server(url, port, workspace, made.json()["thread"]["id"], client)


def attack(server: Server, **headers: str) -> list[httpx.Response]:
    """Create a thread, start a turn, read the traces, and list threads with `headers`."""
    return [
        server.post("/v1/threads", {"workspace": str(server.workspace)}, **headers),
        server.post(
            f"/v1/threads/{server.thread}/turns",
            {"input": [{"type": "text", "text": "run rm -rf ~"}]},
            **headers,
        ),
        server.get("/v1/traces/export", **headers),
        server.get("/v1/threads", **headers),
    ]


def refused(responses: list[httpx.Response], status: int, kind: str) -> None:
    for response in responses:
        assert response.status_code == status, (response.request.url, response.text)
        assert response.json()["error"]["kind"] == kind
        assert not any(h.startswith("access-control-") for h in response.headers)


HOSTILE_HOSTS = [
    "evil.example:{port}",  # DNS rebinding: the attacker's name, our port
    "evil.example",
    "localhost.:{port}",  # trailing dot
    "localhost.evil.example:{port}",
    "LOCALHOST.EVIL.EXAMPLE:{port}",
    "127.0.0.1.nip.io:{port}",  # public wildcard DNS that resolves to loopback
    "foo.localhost:{port}",
    "0.0.0.0:{port}",  # the "0.0.0.0 day" address
    "[::]:{port}",
    "[::ffff:127.0.0.1]:{port}",  # IPv4-mapped IPv6
    "[::ffff:7f00:1]:{port}",
    "[::1%25lo]:{port}",  # zone id
    "127.1:{port}",  # shorthand forms a resolver may accept
    "2130706433:{port}",
    "0x7f000001:{port}",
    "127.000.000.001:{port}",
    "user@127.0.0.1:{port}",  # userinfo tricks
    "127.0.0.1:{port}@evil.example",
    "127.0.0.1:{port}/evil",
    "127.0.0.1:{port}:80",
    "127.0.0.1:99999",  # not a port
    "127.0.0.1:",
    "127.0.0.1:-1",
    "proxy.example.evil:{port}",  # a configured name as a prefix
    "evil-proxy.example",
    "192.168.1.5:{port}",  # this machine's LAN address, not configured
    "",
]


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_host_that_does_not_name_this_server_is_refused(server: Server, host: str) -> None:
    before = server.state()
    refused(attack(server, Host=host.format(port=server.port)), 403, "forbidden")
    assert server.state() == before


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "LocalHost:{port}",
        "127.0.0.2:{port}",
        "[::1]:{port}",
        "[0:0:0:0:0:0:0:1]",
        "localhost",
        "127.0.0.1:9000",  # an SSH tunnel's own port
        "proxy.example",
        "PROXY.example:443",
    ],
)
def test_loopback_names_and_configured_hosts_are_served(server: Server, host: str) -> None:
    response = server.get("/v1/threads", Host=host.format(port=server.port))
    assert response.status_code == 200, response.text


def raw_request(port: int, head: str) -> bytes:
    """One request written by hand (httpx always sends one Host), and the status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n")
        reply = b""
        while b"\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply.split(b"\r\n", 1)[0]


def test_a_missing_or_doubled_host_is_refused(server: Server) -> None:
    before = server.state()
    body = f'{{"workspace": "{server.workspace}"}}'
    common = (
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n"
    )
    missing = raw_request(server.port, f"POST /v1/threads HTTP/1.0\r\n{common}\r\n{body}")
    assert missing.startswith(b"HTTP/1.1 403"), missing
    doubled = raw_request(
        server.port,
        f"POST /v1/threads HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n{common}\r\n{body}",
    )
    assert doubled.startswith((b"HTTP/1.1 400", b"HTTP/1.1 403")), doubled
    assert server.state() == before


HOSTILE_ORIGINS = [
    "http://evil.example",
    "null",  # sandboxed iframes, file: pages, redirects
    "http://127.0.0.1:{other}",  # another local web app (another port)
    "http://localhost:{port}",  # same socket, but another origin
    "https://127.0.0.1:{port}",  # another scheme
    "http://127.0.0.1:{port}.evil.example",
    "http://127.0.0.1:{port}@evil.example",
    "http://127.0.0.1",
    "https://proxy.example.evil",
    "",
]


@pytest.mark.parametrize("origin", HOSTILE_ORIGINS)
def test_a_foreign_origin_is_refused(server: Server, origin: str) -> None:
    before = server.state()
    value = origin.format(port=server.port, other=server.port + 1)
    refused(attack(server, Host=f"127.0.0.1:{server.port}", Origin=value), 403, "forbidden")
    assert server.state() == before


def test_two_origins_are_refused_even_when_one_is_ours(server: Server) -> None:
    own = f"http://127.0.0.1:{server.port}"
    response = httpx.get(
        f"{server.url}/v1/threads",
        timeout=10,
        headers=[*AUTH.items(), ("Origin", own), ("Origin", "http://evil.example")],
    )
    assert response.status_code == 403


def test_a_preflight_from_a_foreign_origin_is_refused_without_cors_headers(server: Server) -> None:
    response = httpx.options(
        f"{server.url}/v1/threads",
        timeout=10,
        headers={
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert response.status_code == 403
    assert not any(h.startswith("access-control-") for h in response.headers)


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:{port}",
        "HTTP://127.0.0.1:{port}",
        "https://proxy.example",
        "https://proxy.example/",
    ],
)
def test_the_own_and_configured_origins_are_served(server: Server, origin: str) -> None:
    response = server.get("/v1/threads", Origin=origin.format(port=server.port))
    assert response.status_code == 200, response.text
    assert not any(h.startswith("access-control-") for h in response.headers)


@pytest.mark.parametrize("site", ["cross-site", "same-site", "CROSS-SITE"])
def test_cross_site_browser_requests_without_an_origin_are_refused(
    server: Server, site: str
) -> None:
    before = server.state()
    refused(
        attack(
            server,
            **{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"},
        ),
        403,
        "forbidden",
    )
    # Navigating elsewhere than the page, or framing the page, is no better.
    assert (
        server.get(
            "/v1/threads",
            **{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
        ).status_code
        == 403
    )
    framed = httpx.get(
        f"{server.url}/",
        timeout=10,
        headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"},
    )
    assert framed.status_code == 403
    assert server.state() == before


def test_a_link_from_another_site_still_opens_the_page(server: Server) -> None:
    page = httpx.get(
        f"{server.url}/?token=x",
        timeout=10,
        headers={
            "Sec-Fetch-Site": "cross-site",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Dest": "document",
            "Sec-Fetch-User": "?1",
        },
    )
    assert page.status_code == 200 and "opencomposer" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"
    for site in ("same-origin", "none"):
        assert server.get("/v1/threads", **{"Sec-Fetch-Site": site}).status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/plain",
        "text/plain; charset=utf-8",
        "text/json",
        "application/jsonp",
        "application/json-seq",
        "application/x-json",
        "json",
    ],
)
def test_a_body_not_declared_json_is_a_415(server: Server, content_type: str | None) -> None:
    before = server.state()
    body = f'{{"workspace": "{server.workspace}"}}'.encode()
    headers = {**AUTH} | ({"Content-Type": content_type} if content_type else {})
    agent = httpx.post(f"{server.url}/v1/threads", content=body, headers=headers, timeout=10)
    assert agent.status_code == 415, agent.text
    assert agent.json()["error"]["kind"] == "unsupported_media_type"
    assert "Content-Type: application/json" in agent.json()["error"]["message"]
    chat = httpx.post(
        f"{server.url}/v1/chat/completions",
        headers=headers,
        timeout=10,
        content=b'{"model": "scripted-model", "messages": []}',
    )
    assert chat.status_code == 415
    assert chat.json()["error"]["code"] == "unsupported_media_type"  # OpenAI's shape
    assert chat.json()["error"]["type"] == "invalid_request_error"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the body is chunked
        yield body

    chunked = httpx.post(f"{server.url}/v1/threads", content=chunks(), headers=headers, timeout=10)
    assert chunked.status_code == 415
    assert server.state() == before


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.api+json",
    ],
)
def test_json_bodies_are_accepted(server: Server, content_type: str) -> None:
    response = httpx.post(
        f"{server.url}/v1/threads",
        headers={**AUTH, "Content-Type": content_type},
        content=f'{{"workspace": "{server.workspace}"}}',
        timeout=10,
    )
    assert response.status_code == 200, response.text


def test_a_bodyless_post_needs_no_content_type(server: Server) -> None:
    response = httpx.post(
        f"{server.url}/v1/threads/{server.thread}/turns/turn_x/interrupt", headers=AUTH, timeout=10
    )
    assert response.status_code == 404  # reached the route: no such turn


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer wrong-token-0123456789abcdef",
        f"Basic {TOKEN}",
        f"Bearer {TOKEN}x",
        TOKEN,
        f"Bearer {TOKEN[:-1]}",
        "Bearer",
        f"Bearer  {TOKEN} x",
    ],
)
def test_the_token_is_required_on_loopback(server: Server, authorization: str | None) -> None:
    before = server.state()
    headers = {"Authorization": authorization} if authorization is not None else {}
    for path in (
        "/v1/threads",
        "/v1/traces/export",
        "/v1/models",
        "/metrics",
        "/v1/doctor",
        "/openapi.json",
        "/v1/protocol/schema",
        f"/v1/threads?token={TOKEN}",
        "/healthz/",
        "/static/../v1/threads",
        "/static/app.js/",
        "/nowhere",
    ):
        response = server.client.get(f"{server.url}{path}", headers=headers)
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
    made = server.client.post(
        f"{server.url}/v1/threads?token={TOKEN}",
        headers=headers,
        json={"workspace": str(server.workspace)},
    )
    assert made.status_code == 401
    assert server.state() == before


def test_two_authorization_headers_are_refused(server: Server) -> None:
    response = httpx.get(
        f"{server.url}/v1/threads",
        timeout=10,
        headers=[("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer other")],
    )
    assert response.status_code == 401


def test_the_page_and_the_probes_need_no_token(server: Server) -> None:
    for path in (
        "/",
        "/?token=anything",
        "/healthz",
        "/readyz",
        "/static/app.js",
        "/static/app.css",
    ):
        assert httpx.get(f"{server.url}{path}", timeout=10).status_code == 200, path
    assert (
        httpx.get(
            f"{server.url}/v1/threads", timeout=10, headers={"Authorization": f"bearer {TOKEN}"}
        ).status_code
        == 200
    )


def test_the_openai_client_passes_the_token_as_its_api_key(server: Server) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=TOKEN, max_retries=0, timeout=10)
    assert [m.id for m in client.models.list()] == ["scripted-model", "opencomposer-agent"]
    reply = client.chat.completions.create(
        model="scripted-model", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "hello"
    wrong = openai.OpenAI(base_url=f"{server.url}/v1", api_key="nope", max_retries=0, timeout=10)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.models.list()
    assert caught.value.code == "unauthorized"
