"""The `sglang` backend: the command lines it builds per checkpoint family, the spec-string
parser, and the server's lifecycle, run against a fake server started through the same
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
from opencomposer.serving.engines.sglang import (
    SGLangEngine,
    SGLangLaunch,
    SGLangLaunchError,
    build_command,
    launch_from_spec,
    read_model_config,
)

PREFIX = ("python", "-m", "sglang.launch_server")
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "num_nextn_predict_layers": 1,
}
KIMI_K2 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "kimi_k2",
    "num_nextn_predict_layers": 0,
}
KIMI_K25 = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "text_config": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "num_nextn_predict_layers": 0,
    },
}


def command(config: dict, **options) -> list[str]:
    launch = SGLangLaunch(**{"model_path": "/models/m", "port": 30000, **options})
    return build_command(launch, config, prefix=PREFIX)


def flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


# --------------------------------------------------------------------------- command lines


def test_deepseek_v3_with_a_nextn_layer_speculates_with_mtp() -> None:
    assert command(DEEPSEEK_V3, model_path="/models/DeepSeek-V3-0324", tp=8) == [
        *PREFIX,
        "--model-path", "/models/DeepSeek-V3-0324", "--host", "127.0.0.1", "--port", "30000",
        "--tp-size", "8",
        "--tool-call-parser", "deepseekv3",
        "--speculative-algorithm", "EAGLE",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
    ]  # fmt: skip


def test_kimi_k25_speculates_with_an_eagle3_draft() -> None:
    cmd = command(
        KIMI_K25, model_path="/models/Kimi-K2.5", tp=8,
        draft_model_path="/models/kimi-k2.5-eagle3",
    )  # fmt: skip
    assert cmd == [
        *PREFIX,
        "--model-path", "/models/Kimi-K2.5", "--host", "127.0.0.1", "--port", "30000",
        "--tp-size", "8", "--trust-remote-code",
        "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/models/kimi-k2.5-eagle3",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
    ]  # fmt: skip


def test_kimi_without_a_draft_does_not_speculate_and_warns(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        cmd = command(KIMI_K2)
    assert not any(part.startswith("--speculative") for part in cmd)
    assert flag(cmd, "--tool-call-parser") == "kimi_k2"
    assert "--trust-remote-code" in cmd
    assert "speculative decoding is off" in caplog.text


def test_explicit_none_turns_mtp_off_quietly(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        cmd = command(DEEPSEEK_V3, speculative="none")
    assert "--speculative-algorithm" not in cmd
    assert not caplog.text


def test_parallelism_and_memory_flags() -> None:
    cmd = command(
        DEEPSEEK_V3, tp=8, dp=8, ep=8, enable_dp_attention=True, mem_fraction_static=0.85,
        context_length=65536, served_model_name="dsv3", extra_args=("--cuda-graph-max-bs", "64"),
        num_steps=1, topk=1, num_draft_tokens=2,
    )  # fmt: skip
    assert flag(cmd, "--tp-size") == "8"
    assert flag(cmd, "--dp-size") == "8"
    assert flag(cmd, "--ep-size") == "8"
    assert "--enable-dp-attention" in cmd
    assert flag(cmd, "--mem-fraction-static") == "0.85"
    assert flag(cmd, "--context-length") == "65536"
    assert flag(cmd, "--served-model-name") == "dsv3"
    assert flag(cmd, "--speculative-num-steps") == "1"
    assert flag(cmd, "--speculative-num-draft-tokens") == "2"
    assert cmd[-2:] == ["--cuda-graph-max-bs", "64"]


def test_single_gpu_defaults_leave_dp_and_ep_to_sglang() -> None:
    cmd = command({})
    assert flag(cmd, "--tp-size") == "1"
    assert "--dp-size" not in cmd and "--ep-size" not in cmd
    assert "--tool-call-parser" not in cmd and "--trust-remote-code" not in cmd


@pytest.mark.parametrize(
    ("config", "path", "tool", "reasoning"),
    [
        (DEEPSEEK_V3, "/models/dsv3", "deepseekv3", None),
        (DEEPSEEK_V3, "/models/DeepSeek-R1-0528", "deepseekv3", "deepseek-r1"),
        (DEEPSEEK_V3, "/models/DeepSeek-V3.1-Terminus", "deepseekv31", "deepseek-v3"),
        ({**DEEPSEEK_V3, "model_type": "deepseek_v32"}, "/models/x", "deepseekv32", "deepseek-v3"),
        ({**DEEPSEEK_V3, "_name_or_path": "deepseek-ai/DeepSeek-R1"}, "/m", "deepseekv3",
         "deepseek-r1"),
    ],
)  # fmt: skip
def test_parsers_follow_the_deepseek_version(config, path, tool, reasoning) -> None:
    cmd = command(config, model_path=path)
    assert flag(cmd, "--tool-call-parser") == tool
    assert flag(cmd, "--reasoning-parser") == reasoning


def test_parser_overrides_win_and_none_turns_one_off() -> None:
    cmd = command(KIMI_K25, tool_call_parser="qwen25", reasoning_parser="none")
    assert flag(cmd, "--tool-call-parser") == "qwen25"
    assert "--reasoning-parser" not in cmd


@pytest.mark.parametrize(
    ("config", "options", "message"),
    [
        (KIMI_K25, {"speculative": "eagle3"}, "needs draft_model_path"),
        (KIMI_K25, {"speculative": "mtp"}, "use speculative=eagle3"),
        ({}, {"speculative": "mtp"}, "has none"),
        (DEEPSEEK_V3, {"speculative": "mtp", "draft_model_path": "/d"}, "only used by"),
        (DEEPSEEK_V3, {"speculative": "none", "draft_model_path": "/d"}, "only used by"),
        (DEEPSEEK_V3, {"enable_dp_attention": True}, "dp >= 2"),
        (DEEPSEEK_V3, {"tp": 8, "dp": 3, "enable_dp_attention": True}, "dividing tp"),
    ],
)
def test_invalid_combinations_are_typed_errors(config, options, message) -> None:
    with pytest.raises(SGLangLaunchError, match=message) as caught:
        command(config, **options)
    assert caught.value.kind == "engine_config" and not caught.value.retryable


def test_model_config_is_read_from_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V3))
    assert read_model_config(str(tmp_path)) == DEEPSEEK_V3
    assert read_model_config("deepseek-ai/DeepSeek-V3") == {}  # a hub id: SGLang downloads it
    with pytest.raises(SGLangLaunchError, match="no checkpoint folder"):
        read_model_config(str(tmp_path / "missing"))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(SGLangLaunchError, match="cannot read it as JSON"):
        read_model_config(str(tmp_path))


# --------------------------------------------------------------------------- spec strings


def test_spec_string() -> None:
    launch = launch_from_spec(
        "sglang:/models/dsv3,tp=8,dp=8,dp_attention=true,spec=mtp,mem=0.8,context=32768,"
        "name=dsv3,port=31000,arg=--cuda-graph-max-bs,arg=64"
    )
    assert launch == SGLangLaunch(
        model_path="/models/dsv3", tp=8, dp=8, enable_dp_attention=True, speculative="mtp",
        mem_fraction_static=0.8, context_length=32768, served_model_name="dsv3", port=31000,
        extra_args=("--cuda-graph-max-bs", "64"),
    )  # fmt: skip
    kimi = launch_from_spec("sglang:/models/kimi,draft=/models/eagle3,tool_call_parser=kimi_k2")
    assert kimi.draft_model_path == "/models/eagle3" and kimi.speculative == "auto"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("vllm:/models/x", "expected sglang:MODEL_PATH"),
        ("sglang:", "expected sglang:MODEL_PATH"),
        ("/models/x", "expected sglang:MODEL_PATH"),
        ("sglang:/m,tpp=8", "did you mean 'tp'"),
        ("sglang:/m,tp", "expected key=value, got 'tp'"),
        ("sglang:/m,colour=red", "unknown key 'colour' \\(valid: arg, context"),
        ("sglang:/m,tp=eight", "tp='eight'"),
        ("sglang:/m,tp=0", "greater than or equal to 1"),
        ("sglang:/m,spec=medusa", "speculative='medusa'"),
        ("sglang:/m,tp=2,tp=4", "given twice"),
        ("sglang:/m,spec=eagle3", "needs draft_model_path"),
    ],
)
def test_bad_spec_strings_are_typed_errors(spec: str, message: str) -> None:
    with pytest.raises(SGLangLaunchError, match=message):
        launch_from_spec(spec)


# --------------------------------------------------------------------------- lifecycle

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
