"""An agent turn against a real llama-cpp-python server (SmolLM2's GGUF,
`--chat_format chatml-function-calling`), the recorded habits of which the fake upstream
replays everywhere else. Slow, and skipped unless `LLAMA_SERVER_PYTHON` names a Python with
`llama-cpp-python[server]` installed: `make test-upstreams` builds one and runs this."""

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.raw_lsp import free_port
from support.smollm2 import smollm2_gguf

from opencomposer.agent.protocol.items import ErrorItem
from opencomposer.agent.protocol.threads import TurnStatus
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings
from opencomposer.serving.engines.openai import OpenAIEngine

from .conftest import text

LLAMA_PYTHON = os.environ.get("LLAMA_SERVER_PYTHON")
WINDOW = 8192
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not LLAMA_PYTHON, reason="no llama-cpp-python server (make test-upstreams builds one)"
    ),
]


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smollm2_gguf(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def llama_server(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's base URL (with `/v1`), once it lists its model."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        str(LLAMA_PYTHON),
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        str(WINDOW),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "llama-cpp-python did not start: " + log.read_text()
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.timeout(900)
async def test_an_agent_turn_runs_against_llama_cpp_python(llama_server, gguf, repo, tmp_path):
    settings = Settings(
        home=tmp_path / "home",
        models_dir=tmp_path / "models",
        engine={
            "backend": "openai",
            "base_url": llama_server,
            # The server lists its model by the file's path; the agent asks for an alias.
            "model": "smollm2",
            "model_aliases": {"smollm2": str(gguf)},
            "context_window": WINDOW,
            "idle_timeout": 600,
            "max_retries": 0,
        },
        agent={"max_steps": 3, "max_step_tokens": 128, "max_wall_time": 800},
    )
    runtime = AgentRuntime(settings, OpenAIEngine(settings.engine))
    try:
        session = await runtime.start_thread(repo)
        turn = await session.run_turn(text("Read calc.py, then say what add returns."))
    finally:
        await runtime.close()
    errors = [item.error for item in session.items if isinstance(item, ErrorItem)]
    # Whether the model calls a tool or answers, every step got an answer: no empty
    # streams retried to failure, no overflow, no unknown model.
    assert (turn.status, errors) == (TurnStatus.completed, [])
    assert turn.usage.model_calls >= 1
