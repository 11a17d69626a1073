"""`opencomposer serve` as a real process: what it serves, and who may call it."""

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from opencomposer.agent.protocol.schema import protocol_schema

CLI = str(Path(sys.executable).parent / "opencomposer")


@contextmanager
def serving(*args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    proc = subprocess.Popen(
        [CLI, "serve", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        line = proc.stdout.readline()
        match = re.search(r"serving at (http://\S+)", line)
        assert match, line + proc.stderr.read()
        yield match.group(1), proc
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def test_serves_health_schema_and_index_on_loopback():
    with serving() as (url, proc):
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
        assert httpx.get(f"{url}/v1/protocol/schema").json() == protocol_schema()
        index = httpx.get(url).text
        assert "/v1/protocol/schema" in index and "/v1/chat/completions" in index
    assert proc.returncode == 130  # a graceful stop on Ctrl-C, with the shell's status for it
    assert "Traceback" not in proc.stderr.read()


def test_non_loopback_bind_requires_the_printed_token():
    with serving("--host", "0.0.0.0") as (url, proc):
        port = url.rsplit(":", 1)[1]
        base = f"http://127.0.0.1:{port}"
        token = re.search(r"Bearer (\S+)'", proc.stderr.readline()).group(1)
        assert httpx.get(f"{base}/healthz").status_code == 200
        denied = httpx.get(f"{base}/v1/protocol/schema")
        assert (denied.status_code, denied.headers["www-authenticate"]) == (401, "Bearer")
        wrong = httpx.get(f"{base}/v1/protocol/schema", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        ok = httpx.get(f"{base}/v1/protocol/schema", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200


def test_configured_token_is_enforced_on_loopback_too():
    with serving("-c", 'server.token="a-long-enough-token"') as (url, _):
        assert httpx.get(f"{url}/v1/threads").status_code == 401
        headers = {"Authorization": "Bearer a-long-enough-token"}
        assert httpx.get(f"{url}/v1/threads", headers=headers).status_code == 200
        # The page itself holds no data and a browser cannot send the token to load it.
        assert httpx.get(f"{url}/").status_code == 200


def test_a_port_in_use_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([CLI, "serve", "--port", str(port)], capture_output=True,
                              text=True, timeout=30)
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr
