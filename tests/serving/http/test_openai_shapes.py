"""The raw JSON of every kind of response the OpenAI-compatible routes send, checked against
OpenAI's own published schemas (`support.openai_schemas`).

The SDK's models accept missing and mistyped fields, so a response it parses can still break
a stricter client; here the bytes on the wire are read with plain httpx and every chunk of a
stream is checked, errors included. The scripted engine gives each shape quickly; logprobs
and fill-in-the-middle come from the embedded tiny model, which computes them for real.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.live_server import live_server
from support.openai_schemas import violations
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.engines.errors import ContextLengthExceeded, EngineServerError

SCRIPTED = "scripted-model"
HELLO = [{"role": "user", "content": "hello"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
CHAT = "CreateChatCompletionResponse"
CHUNK = "CreateChatCompletionStreamResponse"
COMPLETION = "CreateCompletionResponse"
ERROR = "ErrorResponse"


def streamed(url: str, path: str, body: dict[str, Any]) -> list[Any]:
    """Every `data:` payload of a streamed response, decoded; the `[DONE]` ending as is."""
    with httpx.stream("POST", f"{url}{path}", json={**body, "stream": True}) as response:
        assert response.status_code == 200
        payloads = [
            line.removeprefix("data: ")
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]
    return [payload if payload == "[DONE]" else json.loads(payload) for payload in payloads]


def conforming_chunks(frames: list[Any]) -> list[dict[str, Any]]:
    """The chunks of a stream that ends in `[DONE]`, each checked against OpenAI's schema."""
    assert frames[-1] == "[DONE]"
    chunks = frames[:-1]
    assert [violations(CHUNK, chunk) for chunk in chunks] == [[]] * len(chunks)
    return chunks


def test_the_checker_refuses_what_openai_does_and_takes_its_nulls():
    """Guards the schema reading itself: 3.0's `nullable` lets a null through, and only that."""
    choice = {"index": 0, "delta": {"content": "hi"}, "finish_reason": None, "logprobs": None}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    assert violations(CHUNK, chunk | {"choices": [choice], "usage": None}) == []
    wrong = chunk | {"choices": [choice | {"finish_reason": "done"}]}
    assert [line.split(":")[0] for line in violations(CHUNK, wrong)] == ["choices/0/finish_reason"]
    missing = violations(ERROR, {"error": {"message": "m", "type": "t", "code": None}})
    assert [line.split(":")[0] for line in missing] == ["error"]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(text="Hi there!", usage=(7, 3)),
        Reply(reasoning="The user greets me.", text="Hello.", usage=(7, 5)),
        Reply(calls=[call("read_file", path="app.py"), call("read_file", path="util.py")]),
        Reply(text="Hi", reports_usage=False),
    ],
    ids=["text", "reasoning", "tool-calls", "no-usage-reported"],
)
def test_a_chat_completion(tmp_path: Path, reply: Reply):
    with live_server(ScriptedEngine([reply]), tmp_path) as url:
        response = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": SCRIPTED, "messages": HELLO, "tools": TOOLS},
        )
    assert response.status_code == 200
    assert violations(CHAT, response.json()) == []


def test_every_chunk_of_a_streamed_chat_completion(tmp_path: Path):
    reply = Reply(
        reasoning="A file.", text="Let me look.", calls=[call("read_file", path="app.py")]
    )
    body = {
        "model": SCRIPTED,
        "messages": HELLO,
        "tools": TOOLS,
        "stream_options": {"include_usage": True},
    }
    with live_server(ScriptedEngine([reply]), tmp_path) as url:
        chunks = conforming_chunks(streamed(url, "/v1/chat/completions", body))
    # Every kind of chunk was among those checked: role, reasoning, text, a call and its
    # arguments, the finish, and the usage.
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks[:-1]]
    assert {key for delta in deltas for key in delta} == {
        "role",
        "content",
        "reasoning_content",
        "tool_calls",
    }
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] is not None


def test_an_error_mid_stream_is_an_openai_error_event(tmp_path: Path):
    reply = Reply(text="partial answer", error=EngineServerError("upstream died"), fail_after=2)
    body = {"model": SCRIPTED, "messages": HELLO}
    with live_server(ScriptedEngine([reply]), tmp_path) as url:
        frames = streamed(url, "/v1/chat/completions", body)
    *chunks, error, done = frames
    conforming_chunks([*chunks, done])
    assert violations(ERROR, error) == []


@pytest.mark.parametrize(
    ("body", "engine"),
    [
        ({"prompt": "def add(a, b):", "max_tokens": 8}, ScriptedEngine([Reply(text="a + b")])),
        ({"prompt": ["def add(a, b):"], "echo": True}, ScriptedEngine([Reply(text="a + b")])),
        (
            {"prompt": "def add(a, b):\n    return ", "suffix": "\n\nprint(add(1, 2))\n"},
            ScriptedEngine([Reply(text="a + b")], fills_middle=True),
        ),
        ({"prompt": "x"}, ScriptedEngine([Reply(text="y", reports_usage=False)])),
    ],
    ids=["plain", "echo", "suffix", "no-usage-reported"],
)
def test_a_completion(tmp_path: Path, body: dict[str, Any], engine: ScriptedEngine):
    with live_server(engine, tmp_path) as url:
        response = httpx.post(f"{url}/v1/completions", json={"model": SCRIPTED, **body})
    assert response.status_code == 200
    assert violations(COMPLETION, response.json()) == []


def test_the_models_list(tmp_path: Path):
    with live_server(ScriptedEngine([], context_window=4096), tmp_path) as url:
        response = httpx.get(f"{url}/v1/models")
    assert response.status_code == 200
    listed = response.json()
    assert violations("ListModelsResponse", listed) == []
    # The served model (with its window) and the agent, each a Model of its own.
    assert [violations("Model", model) for model in listed["data"]] == [[], []]


@pytest.mark.parametrize(
    ("method", "path", "request_args", "status"),
    [
        ("POST", "/v1/chat/completions", {"json": {"model": SCRIPTED}}, 400),
        ("POST", "/v1/chat/completions", {"json": {"model": SCRIPTED, "messages": HELLO}}, 400),
        ("POST", "/v1/completions", {"json": {"model": SCRIPTED, "prompt": "x", "n": 2}}, 400),
        ("POST", "/v1/chat/completions", {"json": {"model": "gpt-9", "messages": HELLO}}, 404),
        ("POST", "/v1/completions", {"json": {"model": "gpt-9", "prompt": "x"}}, 404),
        ("GET", "/v1/nowhere", {}, 404),
        ("GET", "/v1/chat/completions", {}, 405),
        (
            "POST",
            "/v1/chat/completions",
            {"content": b'{"model": ', "headers": {"Content-Type": "application/json"}},
            400,
        ),
        ("POST", "/v1/completions", {"content": b"prompt=x"}, 415),
    ],
    ids=[
        "validation",
        "engine-refuses",
        "completion-validation",
        "unknown-model",
        "unknown-completion-model",
        "unknown-route",
        "method-not-allowed",
        "bad-json",
        "not-json",
    ],
)
def test_an_error(tmp_path: Path, method: str, path: str, request_args: dict, status: int):
    engine = ScriptedEngine([Reply(error=ContextLengthExceeded("the prompt is too long"))])
    with live_server(engine, tmp_path) as url:
        response = httpx.request(method, f"{url}{path}", **request_args)
    assert response.status_code == status
    assert violations(ERROR, response.json()) == []


# --------------------------------------------------------------------------- the tiny model


@pytest.fixture(scope="module")
def tiny_moe(tmp_path_factory: pytest.TempPathFactory, tiny_models_dir: Path) -> Iterator[str]:
    """One server over the embedded tiny model (a FIM model) for the module; yields its URL."""
    settings = EngineSettings(
        model="tiny-moe", device="cpu", kv_cache_tokens=2048, speculative="none"
    )
    with live_server(
        EmbeddedEngine(settings, tiny_models_dir), tmp_path_factory.mktemp("home")
    ) as url:
        yield url


TINY = {"model": "tiny-moe", "max_tokens": 4, "temperature": 0}


def test_a_chat_completion_with_logprobs(tiny_moe: str):
    body = TINY | {"messages": HELLO, "logprobs": True, "top_logprobs": 2}
    response = httpx.post(f"{tiny_moe}/v1/chat/completions", json=body)
    assert response.status_code == 200
    done = response.json()
    assert len(done["choices"][0]["logprobs"]["content"]) == 4  # what was checked is there
    assert violations(CHAT, done) == []


def test_every_chunk_of_a_streamed_chat_completion_with_logprobs(tiny_moe: str):
    body = TINY | {"messages": HELLO, "logprobs": True, "stream_options": {"include_usage": True}}
    chunks = conforming_chunks(streamed(tiny_moe, "/v1/chat/completions", body))
    carried = [c["choices"][0]["logprobs"] for c in chunks if c["choices"]]
    assert sum(len(logprobs["content"]) for logprobs in carried if logprobs) == 4


def test_a_completion_that_fills_a_middle(tiny_moe: str):
    body = TINY | {"prompt": "def add(a, b):\n    return ", "suffix": "\n\nprint(add(1, 2))\n"}
    response = httpx.post(f"{tiny_moe}/v1/completions", json=body)
    assert response.status_code == 200
    assert violations(COMPLETION, response.json()) == []


def test_a_completion_with_logprobs_and_echo(tiny_moe: str):
    body = TINY | {"prompt": "def add(a, b):", "logprobs": 2, "echo": True}
    response = httpx.post(f"{tiny_moe}/v1/completions", json=body)
    assert response.status_code == 200
    done = response.json()
    assert done["choices"][0]["text"].startswith("def add(a, b):")
    assert violations(COMPLETION, done) == []
