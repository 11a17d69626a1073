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
import torch
from safetensors.torch import save_file
from support.fake_sglang import FAKE

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import ChatMessage, GenerationRequest, complete
from opencomposer.serving.engines.errors import (
    EngineRequestError,
    EngineTimeout,
    EngineUnavailable,
)
from opencomposer.serving.engines.sglang.engine import UPDATES_FOLDER, SGLangEngine
from opencomposer.serving.engines.sglang.flags import SGLangLaunch

HELLO = GenerationRequest(messages=[ChatMessage(role="user", content="hi")])


def fake_engine(tmp_path: Path, mode: str = "ok", model: str | None = None, **options):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir(exist_ok=True)
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "llama"}))
    launch = SGLangLaunch(
        model_path=str(checkpoint), speculative="none", stop_grace=0.5,
        extra_args=("--fake-mode", mode, "--fake-pidfile", str(tmp_path / "pids"),
                    "--fake-record", str(tmp_path / "updates.jsonl")), **options,
    )  # fmt: skip
    settings = EngineSettings(model=model, max_retries=0, connect_timeout=2, idle_timeout=5)
    return SGLangEngine(settings, launch, command_prefix=(sys.executable, str(FAKE)))


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


# --------------------------------------------------------------------------- weights


def updates(tmp_path: Path) -> list[dict]:
    """What the fake server was asked to load, and the tensors it found there."""
    return [json.loads(line) for line in (tmp_path / "updates.jsonl").read_text().splitlines()]


async def test_weights_are_loaded_from_disk_and_stamp_later_results(tmp_path) -> None:
    engine = fake_engine(tmp_path)
    weights = {"model.embed_tokens.weight": torch.ones(8, 4), "lm_head.weight": torch.zeros(8, 4)}
    try:
        assert (await complete(engine, HELLO)).tokens is None  # no update yet: no version
        await engine.update_weights(weights, "step-1")
        first = updates(tmp_path)[-1]["request"]
        result = await complete(engine, HELLO)
        assert result.tokens is not None and result.tokens.weights_version == "step-1"

        file = tmp_path / "step2.safetensors"
        save_file({"lm_head.weight": torch.ones(8, 4)}, file)
        await engine.update_weights(file, "step-2")
        result = await complete(engine, HELLO)
        assert result.tokens is not None and result.tokens.weights_version == "step-2"
    finally:
        await engine.aclose()
    loaded = updates(tmp_path)
    assert [entry["tensors"] for entry in loaded] == [
        {"lm_head.weight": [8, 4], "model.embed_tokens.weight": [8, 4]},
        {"lm_head.weight": [8, 4]},
    ]
    folder = Path(first["model_path"])
    assert first == {
        "model_path": str(folder),
        "load_format": "safetensors",
        "weight_version": "step-1",
    }
    assert folder.parent == tmp_path / "checkpoint" / UPDATES_FOLDER
    # Only the latest update is kept on disk.
    assert list(folder.parent.iterdir()) == [Path(loaded[1]["request"]["model_path"])]


async def test_a_delta_update_is_refused_before_anything_runs(tmp_path) -> None:
    engine = fake_engine(tmp_path)
    with pytest.raises(EngineRequestError, match="whole checkpoints from disk"):
        await engine.update_weights({"lm_head.weight": torch.ones(2)}, "d-1", delta=True)
    assert not (tmp_path / "pids").exists()  # no server was launched for it
    await engine.aclose()


async def test_an_update_the_server_refuses_keeps_the_old_version(tmp_path) -> None:
    engine = fake_engine(tmp_path, mode="refuse-weights")
    try:
        with pytest.raises(EngineRequestError, match=r"'step-1'.*shape mismatch \(fake\)"):
            await engine.update_weights({"lm_head.weight": torch.ones(8, 4)}, "step-1")
        assert (await complete(engine, HELLO)).tokens is None
    finally:
        await engine.aclose()
    assert len(updates(tmp_path)) == 1
    assert list((tmp_path / "checkpoint" / UPDATES_FOLDER).iterdir()) == []  # not left behind
