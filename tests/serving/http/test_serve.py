"""`opencomposer serve` as a real process: what it serves, the token it prints and keeps, and
who may call it."""

import contextlib
import signal
import socket
import stat
import subprocess
import threading
from pathlib import Path

import httpx
from support.fake_openai import Endless, ThreadedFakeOpenAI
from support.serve_process import CLI, serving

from opencomposer import paths
from opencomposer.agent.protocol.schema import protocol_schema


def test_serves_health_schema_and_index_on_loopback_with_the_printed_token():
    with serving() as served:
        assert served.url.startswith("http://127.0.0.1:")
        assert served.get("/healthz").json()["status"] == "ok"
        assert served.get("/v1/protocol/schema").status_code == 401
        assert served.get("/v1/protocol/schema", served.token).json() == protocol_schema()
        assert served.page == f"{served.url}/?token={served.token}"
        assert served.models == "smollm2-135m (embedded engine) and opencomposer-agent (the agent)"
        for route in ("/v1/models", "/v1/chat/completions", "/v1/completions", "/v1/threads"):
            assert f"{served.url}{route} " in served.banner
        index = httpx.get(served.page, timeout=10).text  # the page opens from the printed URL
        assert "/v1/protocol/schema" in index and "/v1/chat/completions" in index
    assert served.proc.returncode == 130  # a graceful stop on Ctrl-C, with the shell's status
    assert "Traceback" not in served.proc.stderr.read()


def test_the_made_token_is_private_and_kept_across_restarts():
    with serving() as first:
        assert first.get("/v1/threads", first.token).status_code == 200
    kept = paths.default_home() / "server-token"
    assert kept.read_text().strip() == first.token
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    with serving() as second:
        assert second.token == first.token  # clients configured with it keep working
        assert second.get("/v1/threads", first.token).status_code == 200


def test_a_wildcard_bind_prints_a_loopback_url_and_checks_hosts():
    with serving("--host", "0.0.0.0") as served:
        assert served.url.startswith("http://127.0.0.1:")
        assert served.get("/healthz").status_code == 200
        denied = served.get("/v1/protocol/schema")
        assert (denied.status_code, denied.headers["www-authenticate"]) == (401, "Bearer")
        assert served.get("/v1/protocol/schema", "nope-nope-nope-nope").status_code == 401
        assert served.get("/v1/protocol/schema", served.token).status_code == 200
        foreign = served.get("/v1/protocol/schema", served.token, Host="evil.example")
        assert foreign.status_code == 403
        assert "server.allowed_hosts" in foreign.json()["error"]["message"]


def test_configured_token_is_enforced_on_loopback_too():
    with serving("-c", 'server.token="a-long-enough-token"') as served:
        assert served.token == "a-long-enough-token"
        assert served.get("/v1/threads").status_code == 401
        assert served.get("/v1/threads", "a-long-enough-token").status_code == 200
        # The page itself holds no data and a browser cannot send the token to load it.
        assert served.get("/").status_code == 200
    assert not (paths.default_home() / "server-token").exists()


def test_auth_none_is_honoured_on_loopback_only():
    with serving("-c", 'server.auth="none"') as served:
        assert served.token is None and served.page == f"{served.url}/"  # no token to carry
        assert served.get("/v1/threads").status_code == 200
        assert served.get("/v1/threads", Host="evil.example").status_code == 403
    assert 'server.auth = "none"' in served.proc.stderr.read()
    refused = subprocess.run(
        [CLI, "serve", "--port", "0", "--host", "0.0.0.0", "-c", 'server.auth="none"'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "accepted only on a loopback address" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_an_unusable_token_is_a_clear_error():
    short = subprocess.run(
        [CLI, "serve", "--port", "0", "-c", 'server.token="short"'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert short.returncode == 1
    assert "server.token must be 16 to 512 characters" in " ".join(short.stderr.split())
    kept = paths.default_home() / "server-token"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("has spaces in it and is not a token\n")
    broken = subprocess.run(
        [CLI, "serve", "--port", "0"], capture_output=True, text=True, timeout=60
    )
    assert broken.returncode == 1
    assert "delete it to make a new one" in " ".join(broken.stderr.split())
    assert "Traceback" not in short.stderr + broken.stderr


def test_a_port_in_use_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [CLI, "serve", "--port", str(port)], capture_output=True, text=True, timeout=30
        )
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_doctor_reports_who_may_call_the_server(tmp_path: Path):
    from opencomposer.config import Settings
    from opencomposer.serving.doctor import Check, check_server_auth

    made = check_server_auth(Settings(home=tmp_path))
    assert made == Check(
        "http auth",
        "ok",
        "bearer token required, on loopback too "
        f"({tmp_path / 'server-token'}); Host and Origin checked",
    )
    configured = check_server_auth(Settings(home=tmp_path, server={"token": "x" * 20}))
    assert "(server.token)" in configured.detail
    open_local = check_server_auth(Settings(server={"auth": "none"}))
    assert open_local.status == "warn" and "any program on this machine" in open_local.detail
    open_wide = check_server_auth(Settings(server={"auth": "none", "host": "0.0.0.0"}))
    assert (open_wide.status, open_wide.disables) == ("error", "opencomposer serve")


def test_a_stop_cancels_a_generation_that_never_ends(tmp_path: Path):
    """SIGTERM with a streamed completion in flight: the server waits
    `server.shutdown_timeout`, then cancels the request (the upstream sees its client go)
    and exits, instead of serving the endless stream on."""
    with ThreadedFakeOpenAI() as fake:
        fake.enqueue(Endless())
        engine = f"openai:{fake.base_url}"
        with serving("--engine", engine, "-c", "server.shutdown_timeout=1") as served:
            body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
            started = threading.Event()

            def read_forever() -> None:
                headers = {"Authorization": f"Bearer {served.token}"}
                with (
                    httpx.stream(
                        "POST",
                        f"{served.url}/v1/chat/completions",
                        json={**body, "stream": True},
                        headers=headers,
                        timeout=60,
                    ) as response,
                    contextlib.suppress(httpx.HTTPError),
                ):
                    for _ in response.iter_lines():
                        started.set()

            reader = threading.Thread(target=read_forever, daemon=True)
            reader.start()
            assert started.wait(60), "the stream never began"
            served.proc.send_signal(signal.SIGTERM)
            # uvicorn ends by raising the signal again once it has shut down.
            assert served.proc.wait(timeout=60) == -signal.SIGTERM
            assert "Traceback" not in served.proc.stderr.read()
            reader.join(10)
            assert not reader.is_alive()  # the server closed the stream on its way out
    assert fake.disconnects == 1
