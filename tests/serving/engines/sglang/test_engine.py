"""The `sglang` engine's server lifecycle, run against a fake server started through the same
launch path (SGLang itself only runs on GPU machines)."""

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import ChatMessage, GenerationRequest, complete
from opencomposer.serving.engines.errors import EngineTimeout, EngineUnavailable
from opencomposer.serving.engines.sglang.engine import SGLangEngine
from opencomposer.serving.engines.sglang.flags import SGLangLaunch

# Speaks just enough of SGLang's HTTP API. Its child ignores SIGTERM, like a wedged
# scheduler process, so only a group SIGKILL removes it. Modes come in as extra args.
FAKE_SERVER = r"""
import json, os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default

mode = opt("--fake-mode")
print("fake sglang starting:", " ".join(args), flush=True)
if mode == "crash":
    print("RuntimeError: CUDA out of memory (fake)", flush=True)
    sys.exit(3)
if mode == "slow":  # loading weights
    time.sleep(1)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                          "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
with open(opt("--fake-pidfile"), "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
model = opt("--served-model-name") or opt("--model-path")

def chunk(delta, finish=None):
    body = {"id": "c", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()

class Handler(BaseHTTPRequestHandler):
    def log_message(self, format, *values):
        print("request:", format % values, flush=True)

    def do_GET(self):
        if mode == "hang":
            return self.send_error(503)
        models = {"object": "list", "data": [{"id": model, "object": "model"}]}
        body = {"/health": {}, "/v1/models": models}.get(self.path)
        if body is None:
            return self.send_error(404)
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in ("hello ", "from ", "sglang"):
            self.wfile.write(chunk({"content": piece}))
        self.wfile.write(chunk({}, "stop"))
        usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
        final = {"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [],
                 "usage": usage}
        self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

ThreadingHTTPServer((opt("--host"), int(opt("--port"))), Handler).serve_forever()
"""

HELLO = GenerationRequest(messages=[ChatMessage(role="user", content="hi")])


def fake_engine(tmp_path: Path, mode: str = "ok", model: str | None = None, **options):
    script = tmp_path / "fake_sglang.py"
    script.write_text(FAKE_SERVER)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir(exist_ok=True)
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "llama"}))
    launch = SGLangLaunch(
        model_path=str(checkpoint), speculative="none", stop_grace=0.5,
        extra_args=("--fake-mode", mode, "--fake-pidfile", str(tmp_path / "pids")), **options,
    )  # fmt: skip
    settings = EngineSettings(model=model, max_retries=0, connect_timeout=2, idle_timeout=5)
    return SGLangEngine(settings, launch, command_prefix=(sys.executable, str(script)))


def server_pids(tmp_path: Path) -> list[int]:
    return [int(pid) for pid in (tmp_path / "pids").read_text().split()]


def running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (a dead child nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 5
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if running(pid)], "orphaned server processes"


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@needs_proc
async def test_launches_on_first_use_streams_and_stops_the_whole_group(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="opencomposer.serving.engines.sglang")
    engine = fake_engine(tmp_path, model="served-name")
    try:
        assert not (tmp_path / "pids").exists()  # lazy: nothing runs before first use
        result = await complete(engine, HELLO)
        assert result.text == "hello from sglang"
        assert result.finish_reason == "stop"
        assert [m.id for m in await engine.models()] == ["served-name"]
        pids = server_pids(tmp_path)
        assert all(running(pid) for pid in pids)
    finally:
        await engine.aclose()
    assert_all_gone(pids)
    assert "fake sglang starting: --model-path" in caplog.text  # server output forwarded
    assert "--served-model-name served-name" in caplog.text


async def test_a_server_that_died_is_relaunched_on_next_use(tmp_path) -> None:
    engine = fake_engine(tmp_path)
    try:
        await engine.models()
        first = server_pids(tmp_path)
        os.killpg(first[0], signal.SIGKILL)  # e.g. the OOM killer
        async with asyncio.timeout(10):
            while True:  # a request may fail before the exit is noticed; then it relaunches
                with contextlib.suppress(EngineUnavailable):
                    assert (await complete(engine, HELLO)).text == "hello from sglang"
                    break
                await asyncio.sleep(0.05)
        assert server_pids(tmp_path) != first
    finally:
        await engine.aclose()


async def test_a_cancelled_first_request_leaves_the_launch_running(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="opencomposer.serving.engines.sglang")
    engine = fake_engine(tmp_path, mode="slow")
    try:
        first = asyncio.create_task(engine.models())
        await asyncio.sleep(0.3)
        first.cancel()
        _, result = await asyncio.gather(engine.models(), complete(engine, HELLO))
        assert result.text == "hello from sglang"
        assert caplog.text.count("launching SGLang") == 1
    finally:
        await engine.aclose()


async def test_a_server_that_exits_while_starting_is_unavailable_with_its_log(tmp_path) -> None:
    engine = fake_engine(tmp_path, mode="crash")
    with pytest.raises(EngineUnavailable, match="exited with code 3") as caught:
        await engine.models()
    assert "CUDA out of memory (fake)" in caught.value.message
    await engine.aclose()


@needs_proc
async def test_a_server_that_never_gets_healthy_times_out_and_is_killed(tmp_path) -> None:
    engine = fake_engine(tmp_path, mode="hang", startup_timeout=1.0)
    with pytest.raises(EngineTimeout, match="not ready after 1s") as caught:
        await engine.models()
    assert 'request: "GET /health' in caught.value.message
    assert_all_gone(server_pids(tmp_path))


@needs_proc
@pytest.mark.filterwarnings("ignore::ResourceWarning")
async def test_an_engine_dropped_without_aclose_still_stops_its_server(tmp_path) -> None:
    engine = fake_engine(tmp_path)
    await engine.models()
    pids = server_pids(tmp_path)
    del engine
    gc.collect()
    assert_all_gone(pids)
    # Let the log reader see the closed pipe and finish, so its transport is collected here,
    # in this test's event loop, rather than as an unraisable error after the loop is closed.
    await asyncio.sleep(0.5)
    gc.collect()
