"""The OpenAI-compatible endpoints, as the official `openai` SDK and raw HTTP clients see them
from a real server: shapes, streaming, parameters reaching the engine, errors and statuses."""

import json
import time
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import openai
import pytest
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import Engine, GenerationResult, TokenTrace, ToolCall, Usage
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineError,
    EngineServerError,
    EngineTimeout,
    EngineUnavailable,
)
from opencomposer.serving.engines.replay import ReplayEngine

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
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def serve(tmp_path: Path):
    """Start a server over an engine; yields the base URL."""

    def start(engine: Engine) -> AbstractContextManager[str]:
        return live_server(engine, tmp_path / "oc-home")

    return start


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def sse_payloads(response: httpx.Response) -> list[str]:
    return [
        line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")
    ]


def test_lists_models_with_their_context_window(serve):
    with serve(ScriptedEngine([], context_window=4096)) as url:
        page = client(url).models.list()
    # The agent is listed too: it answers chat completions as a model does.
    assert [m.id for m in page.data] == ["scripted-model", "opencomposer-agent"]
    assert [m.object for m in page.data] == ["model", "model"]
    assert page.data[0].model_extra["context_window"] == 4096
    assert "context_window" not in page.data[1].model_extra


def test_completion_returns_text_usage_and_the_model(serve):
    engine = ScriptedEngine([Reply(text="Hi there!", usage=(7, 3))])
    with serve(engine) as url:
        done = client(url).chat.completions.create(model="scripted-model", messages=HELLO)
    assert done.object == "chat.completion"
    assert done.model == "scripted-model"
    assert done.choices[0].message.content == "Hi there!"
    assert done.choices[0].message.tool_calls is None
    assert done.choices[0].finish_reason == "stop"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (
        7,
        3,
        10,
    )


async def test_async_stream_sends_role_deltas_finish_then_usage(serve):
    engine = ScriptedEngine([Reply(text="streamed words here", usage=(5, 4))])
    with serve(engine) as url:
        sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        stream = await sdk.chat.completions.create(
            model="scripted-model",
            messages=HELLO,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        await sdk.close()
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed words here"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 9
    assert all(c.usage is None for c in chunks[:-1])
    assert {c.id for c in chunks} == {chunks[0].id}


def test_stream_without_include_usage_has_no_usage_chunk(serve):
    with serve(ScriptedEngine([Reply(text="ok")])) as url:
        chunks = list(
            client(url).chat.completions.create(model="scripted-model", messages=HELLO, stream=True)
        )
    assert all(c.choices and c.usage is None for c in chunks)


def test_two_parallel_tool_calls_without_streaming(serve):
    reply = Reply(
        text="Reading both.", calls=[call("read_file", path="a.py"), call("read_file", path="b.py")]
    )
    engine = ScriptedEngine([reply])
    with serve(engine) as url:
        done = client(url).chat.completions.create(
            model="scripted-model",
            messages=HELLO,
            tools=TOOLS,
            parallel_tool_calls=True,
            tool_choice={"type": "function", "function": {"name": "read_file"}},
        )
    message = done.choices[0].message
    assert done.choices[0].finish_reason == "tool_calls"
    calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]
    assert calls == [
        ("call_1_0", "read_file", {"path": "a.py"}),
        ("call_1_1", "read_file", {"path": "b.py"}),
    ]
    sent = engine.requests[0]
    assert sent.tool_choice == "read_file"
    assert [(t.name, t.description) for t in sent.tools] == [("read_file", "Read a file")]


def test_tool_calls_stream_as_indexed_deltas(serve):
    reply = Reply(calls=[call("read_file", path="a.py"), call("read_file", path="b.py")])
    with serve(ScriptedEngine([reply])) as url:
        chunks = list(
            client(url).chat.completions.create(
                model="scripted-model", messages=HELLO, tools=TOOLS, stream=True
            )
        )
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                assert not entry["id"]  # id and name come once, in the call's first delta
                entry |= {"id": delta.id, "name": delta.function.name}
            entry["arguments"] += delta.function.arguments or ""
    assert calls == {
        0: {"id": "call_1_0", "name": "read_file", "arguments": '{"path": "a.py"}'},
        1: {"id": "call_1_1", "name": "read_file", "arguments": '{"path": "b.py"}'},
    }
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_history_with_tool_results_and_sampling_reach_the_engine(serve):
    engine = ScriptedEngine([Reply(text="done")])
    history = [
        {
            "role": "system",
            "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
        },
        {"role": "user", "content": "read a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
    ]
    with serve(engine) as url:
        client(url).chat.completions.create(
            model="scripted-model",
            messages=history,
            temperature=0.3,
            top_p=0.9,
            max_tokens=12,
            stop="\n\n",
            seed=42,
        )
    sent = engine.requests[0]
    assert [m.role for m in sent.messages] == ["system", "user", "assistant", "tool"]
    assert sent.messages[0].content == "Be brief."
    assert sent.messages[2].tool_calls == [
        ToolCall(id="c1", name="read_file", arguments='{"path":"a.py"}')
    ]
    assert sent.messages[3].tool_call_id == "c1"
    assert sent.sampling.model_dump() == {
        "temperature": 0.3,
        "top_p": 0.9,
        "top_k": None,
        "max_tokens": 12,
        "stop": ["\n\n"],
        "seed": 42,
    }
    assert sent.model == "scripted-model"
    assert not sent.capture.logprobs


def test_max_completion_tokens_and_stop_list(serve):
    engine = ScriptedEngine([Reply(text="x")])
    with serve(engine) as url:
        client(url).chat.completions.create(
            model="scripted-model", messages=HELLO, max_completion_tokens=5, stop=["a", "b"]
        )
    assert engine.requests[0].sampling.max_tokens == 5
    assert engine.requests[0].sampling.stop == ["a", "b"]


def test_logprobs_when_asked(serve):
    result = GenerationResult(
        text="ab",
        usage=Usage(3, 2),
        tokens=TokenTrace(completion_token_ids=[11, 12], logprobs=[-0.5, -1.25]),
    )
    with serve(ReplayEngine([result, result])) as url:
        sdk = client(url)
        done = sdk.chat.completions.create(
            model="replay", messages=HELLO, logprobs=True, top_logprobs=2
        )
        plain = sdk.chat.completions.create(model="replay", messages=HELLO)
    content = done.choices[0].logprobs.content
    assert [(t.token, t.logprob) for t in content] == [
        ("token_id:11", -0.5),
        ("token_id:12", -1.25),
    ]
    assert plain.choices[0].logprobs is None


def test_logprobs_capture_is_requested_from_the_engine(serve):
    engine = ScriptedEngine([Reply(text="x")])
    with serve(engine) as url:
        client(url).chat.completions.create(
            model="scripted-model", messages=HELLO, logprobs=True, top_logprobs=3
        )
    capture = engine.requests[0].capture
    assert (capture.logprobs, capture.token_ids, capture.top_logprobs) == (True, True, 3)


def test_n_above_one_is_a_bad_request(serve):
    engine = ScriptedEngine([Reply(text="x")])
    with serve(engine) as url, pytest.raises(openai.BadRequestError) as caught:
        client(url).chat.completions.create(model="scripted-model", messages=HELLO, n=2)
    assert caught.value.body["param"] == "n"
    assert engine.requests == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"messages": [', None),
        (b'{"model": "m", "messages": "hello"}', "messages"),
        (b'{"model": "m", "messages": [{"role": "robot", "content": "x"}]}', "messages.0.role"),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}',
            "temperature",
        ),
        (b'{"model": "m", "messages": []}', "messages"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', "model"),
    ],
)
def test_invalid_requests_get_openai_errors(serve, body: bytes, param: str | None):
    with serve(ScriptedEngine([])) as url:
        response = httpx.post(
            f"{url}/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    if param is not None:
        assert error["param"] == param


def test_unknown_model_is_404_and_the_agent_needs_a_thread(serve):
    with serve(ScriptedEngine([])) as url:
        sdk = client(url)
        with pytest.raises(openai.NotFoundError) as missing:
            sdk.chat.completions.create(model="gpt-9", messages=HELLO)
        with pytest.raises(openai.BadRequestError) as agent:
            sdk.chat.completions.create(model="opencomposer-agent", messages=HELLO)
        with pytest.raises(openai.NotFoundError) as unknown:
            sdk.chat.completions.create(
                model="opencomposer-agent",
                messages=HELLO,
                extra_headers={"X-Opencomposer-Thread": "thr_nope"},
            )
    assert missing.value.body["code"] == "model_not_found"
    assert agent.value.body["code"] == "thread_required"
    assert unknown.value.body["code"] == "thread_not_found"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (ContextLengthExceeded("too long"), 400, "context_length_exceeded"),
        (EngineUnavailable("no server"), 503, "engine_unavailable"),
        (EngineTimeout("silent"), 504, "engine_timeout"),
        (EngineServerError("crashed"), 502, "engine_server_error"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_engine_errors_map_to_statuses(
    serve, error: EngineError, status: int, code: str, stream: bool
):
    with serve(ScriptedEngine([Reply(error=error)])) as url:
        response = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "scripted-model", "messages": HELLO, "stream": stream},
        )
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"] == error.message


def test_failure_after_streaming_started_is_a_final_error_event(serve):
    reply = Reply(text="partial answer", error=EngineServerError("died"), fail_after=2)
    with serve(ScriptedEngine([reply, reply])) as url:
        with httpx.stream(
            "POST",
            f"{url}/v1/chat/completions",
            json={"model": "scripted-model", "messages": HELLO, "stream": True},
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            payloads = sse_payloads(response)
        with pytest.raises(openai.APIError, match="died"):
            list(
                client(url).chat.completions.create(
                    model="scripted-model", messages=HELLO, stream=True
                )
            )
    assert payloads[-1] == "[DONE]"
    assert json.loads(payloads[-2])["error"]["code"] == "engine_server_error"
    assert json.loads(payloads[1])["choices"][0]["delta"] == {"content": "part"}


def test_client_disconnect_mid_stream_closes_the_engine_stream(serve):
    engine = ScriptedEngine([Reply(text="never finishes", hang_after=2)])
    with serve(engine) as url:
        with httpx.stream(
            "POST",
            f"{url}/v1/chat/completions",
            json={"model": "scripted-model", "messages": HELLO, "stream": True},
        ) as response:
            lines = response.iter_lines()
            while not next(lines).startswith('data: {"id"'):
                pass
        deadline = time.monotonic() + 10
        while engine.closed_mid_stream == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert engine.closed_mid_stream == 1


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_a_client_gone_before_its_whole_reply_cancels_the_generation(serve, route: str):
    """A whole reply is sent only at the end: a client that hangs up before must not leave
    its generation running (the engine's stream is closed, which aborts it)."""
    engine = ScriptedEngine([Reply(text="never finishes", hang_after=2)])
    if route == "chat":
        path, body = "chat/completions", {"model": "scripted-model", "messages": HELLO}
    else:
        path, body = "completions", {"model": "scripted-model", "prompt": "x", "max_tokens": 5}
    with serve(engine) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/v1/{path}", json=body, timeout=1.0)
        deadline = time.monotonic() + 10
        while engine.closed_mid_stream == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.closed_mid_stream == 1
        # The server goes on answering.
        assert httpx.get(f"{url}/v1/models").status_code == 200


def test_bearer_token_guards_the_model_routes(tmp_path: Path):
    with live_server(ScriptedEngine([Reply(text="x")]), tmp_path, token="secret") as url:
        assert httpx.get(f"{url}/v1/models").status_code == 401
        sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="secret", max_retries=0)
        assert (
            sdk.chat.completions.create(model="scripted-model", messages=HELLO)
            .choices[0]
            .message.content
            == "x"
        )


# --------------------------------------------------------------------------- a real model


def test_the_embedded_tiny_model_answers_and_streams(serve, tiny_models_dir: Path):
    settings = EngineSettings(
        model="tiny-moe", device="cpu", kv_cache_tokens=2048, speculative="none"
    )
    with serve(EmbeddedEngine(settings, tiny_models_dir)) as url:
        sdk = client(url)
        done = sdk.chat.completions.create(
            model="tiny-moe", messages=HELLO, max_tokens=4, temperature=0, logprobs=True
        )
        chunks = list(
            sdk.chat.completions.create(
                model="tiny-moe",
                messages=HELLO,
                max_tokens=4,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assert done.choices[0].finish_reason == "length"
    assert done.usage.completion_tokens == 4
    assert len(done.choices[0].logprobs.content) == 4
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == done.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 4


def test_the_model_list_is_not_fetched_for_every_completion(serve):
    class Counting(ScriptedEngine):
        asked = 0

        async def models(self):
            Counting.asked += 1
            return await super().models()

    with serve(Counting([Reply(text="one"), Reply(text="two")])) as url:
        sdk = client(url)
        for _ in range(2):
            sdk.chat.completions.create(model="scripted-model", messages=HELLO)
    assert Counting.asked == 1
