"""What the OpenAI surface accepts either works as OpenAI documents it or is refused in OpenAI's
error shape, never silently ignored: unknown and unsupported arguments, a missing model,
OpenAI's default temperature, tool choices that cannot hold, and routes and methods that do not
exist (in the shape of the API their path belongs to). Driven with the official `openai`
client and raw HTTP against a live server."""

from pathlib import Path

import httpx
import openai
import pytest
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine, call

HELLO = [{"role": "user", "content": "hello"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
MODEL = "scripted-model"


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


@pytest.fixture
def server(tmp_path: Path):
    engine = ScriptedEngine([Reply(text="hi")] * 20)
    with live_server(engine, tmp_path / "home") as url:
        yield url, engine


def openai_error(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize(
    "arguments",
    [
        {"frobnicate": 1},
        {"temprature": 0.5},  # a typo is the common case: it must not pass for the default
        {"frequency_penalty": 0.5},
        {"presence_penalty": -1},
        {"logit_bias": {"42": 10}},
        {"reasoning_effort": "high"},
        {"modalities": ["text", "audio"]},
    ],
)
def test_arguments_not_honoured_are_refused(server, arguments: dict) -> None:
    url, engine = server
    with pytest.raises(openai.BadRequestError) as refused:
        sdk(url).chat.completions.create(model=MODEL, messages=HELLO, extra_body=arguments)
    (name,) = arguments
    assert refused.value.status_code == 400
    assert name in refused.value.message
    assert engine.requests == []


def test_an_unknown_argument_gets_openais_message(server) -> None:
    url, _ = server
    response = httpx.post(
        f"{url}/v1/completions", json={"model": MODEL, "prompt": "x", "best_off": 2}
    )
    assert response.status_code == 400
    assert openai_error(response)["message"] == "Unrecognized request argument supplied: best_off"


@pytest.mark.parametrize(
    "arguments",
    [
        {"user": "u-1", "metadata": {"run": "7"}, "store": False, "service_tier": "auto"},
        {"frequency_penalty": 0, "presence_penalty": 0.0, "logit_bias": {}},
        {"response_format": {"type": "text"}, "modalities": ["text"]},
    ],
)
def test_arguments_that_change_nothing_or_are_off_are_accepted(server, arguments: dict) -> None:
    url, engine = server
    done = sdk(url).chat.completions.create(model=MODEL, messages=HELLO, extra_body=arguments)
    assert done.choices[0].message.content == "hi"
    assert len(engine.requests) == 1


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_a_missing_model_is_a_400_naming_it(server, path: str) -> None:
    url, engine = server
    body = {"messages": HELLO} if "chat" in path else {"prompt": "x"}
    response = httpx.post(f"{url}{path}", json=body)
    assert response.status_code == 400
    assert openai_error(response)["param"] == "model"
    assert engine.requests == []


def test_temperature_defaults_to_openais_one(server) -> None:
    url, engine = server
    client = sdk(url)
    client.chat.completions.create(model=MODEL, messages=HELLO)
    client.chat.completions.create(model=MODEL, messages=HELLO, temperature=0)
    client.completions.create(model=MODEL, prompt="x")
    temperatures = [request.sampling.temperature for request in engine.requests]
    assert temperatures == [1.0, 0.0, 1.0]


def test_tool_choices_that_cannot_hold_are_refused(server) -> None:
    url, engine = server
    client = sdk(url)
    with pytest.raises(openai.BadRequestError) as unknown:
        client.chat.completions.create(
            model=MODEL,
            messages=HELLO,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "delete_everything"}},
        )
    message = unknown.value.body["message"]  # type: ignore[index]
    assert "the function 'delete_everything', which is not among the tools (read_file)" in message
    with pytest.raises(openai.BadRequestError, match="only allowed when tools"):
        client.chat.completions.create(model=MODEL, messages=HELLO, tool_choice="required")
    assert engine.requests == []
    # A choice the engine can hold reaches it as sent; none sent stays unsent.
    client.chat.completions.create(
        model=MODEL,
        messages=HELLO,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "read_file"}},
    )
    client.chat.completions.create(model=MODEL, messages=HELLO, tools=TOOLS)
    assert [request.tool_choice for request in engine.requests] == ["read_file", None]


@pytest.mark.parametrize(
    ("route", "param", "tokens"),
    [
        ("chat", "max_tokens", 32_769),
        ("chat", "max_completion_tokens", 10**9),
        ("completions", "max_tokens", 40_000),
    ],
)
def test_a_completion_longer_than_the_window_is_refused(
    server, route: str, param: str, tokens: int
) -> None:
    """As at OpenAI: a 400 naming the argument and the window, before the engine is asked."""
    url, engine = server
    client = sdk(url)
    with pytest.raises(openai.BadRequestError) as refused:
        if route == "chat":
            client.chat.completions.create(model=MODEL, messages=HELLO, **{param: tokens})
        else:
            client.completions.create(model=MODEL, prompt="x", max_tokens=tokens)
    error = refused.value.body
    assert (error["param"], error["code"]) == (param, "invalid_value")  # type: ignore[index]
    assert f"{tokens:,}" in error["message"] and "32,768" in error["message"]  # type: ignore[index]
    assert engine.requests == []
    # The whole window is still a length one may ask for.
    client.chat.completions.create(model=MODEL, messages=HELLO, **{param: 32_768})
    assert [request.sampling.max_tokens for request in engine.requests] == [32_768]


def test_line_breaks_beside_tool_calls_are_no_content(tmp_path: Path) -> None:
    """A model prints a line break before and between its calls; OpenAI's content is then
    null, and no chunk streams it. Whitespace inside an answer is kept, in order."""
    calls = [call("read_file", path="a.py"), call("read_file", path="b.py")]
    engine = ScriptedEngine(
        [Reply(text="\n\n", calls=calls)] * 2 + [Reply(text="Hi\n\n    \nthere"), Reply(text=" \n")]
    )
    with live_server(engine, tmp_path / "home") as url:
        client = sdk(url)
        whole = client.chat.completions.create(model=MODEL, messages=HELLO, tools=TOOLS)
        assert whole.choices[0].message.content is None
        assert len(whole.choices[0].message.tool_calls or []) == 2
        chunks = list(
            client.chat.completions.create(model=MODEL, messages=HELLO, tools=TOOLS, stream=True)
        )
        deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
        assert [d.content for d in deltas if d.content] == []
        assert sum(len(d.tool_calls or []) for d in deltas) == 4  # each call's start and arguments
        for answer in ("Hi\n\n    \nthere", " \n"):  # an answer of whitespace alone too
            streamed = client.chat.completions.create(model=MODEL, messages=HELLO, stream=True)
            assert (
                "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == answer
            )


def test_parallel_tool_calls_false_gives_one_call_whatever_the_backend_printed(
    tmp_path: Path,
) -> None:
    calls = [call("read_file", path="a.py"), call("read_file", path="b.py")]
    engine = ScriptedEngine([Reply(calls=calls)] * 3)
    with live_server(engine, tmp_path / "home") as url:
        client = sdk(url)
        one = dict(model=MODEL, messages=HELLO, tools=TOOLS, parallel_tool_calls=False)
        whole = client.chat.completions.create(**one)
        assert [c.function.arguments for c in whole.choices[0].message.tool_calls or []] == [
            '{"path": "a.py"}'
        ]
        assert whole.choices[0].finish_reason == "tool_calls"
        chunks = list(client.chat.completions.create(**one, stream=True))
        streamed = [
            c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or []
        ]
        assert {c.index for c in streamed} == {0}
        both = client.chat.completions.create(model=MODEL, messages=HELLO, tools=TOOLS)
        assert len(both.choices[0].message.tool_calls or []) == 2
    assert [r.parallel_tool_calls for r in engine.requests] == [False, False, None]


def test_response_format_reaches_the_engine_as_sent(server) -> None:
    url, engine = server
    client = sdk(url)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    client.chat.completions.create(
        model=MODEL,
        messages=HELLO,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "check", "schema": schema, "strict": True},
        },
    )
    client.chat.completions.create(
        model=MODEL, messages=HELLO, response_format={"type": "json_object"}
    )
    client.chat.completions.create(model=MODEL, messages=HELLO, response_format={"type": "text"})
    formats = [request.response_format for request in engine.requests]
    assert formats[0] is not None and formats[0].to_openai() == {
        "type": "json_schema",
        "json_schema": {"name": "check", "schema": schema, "strict": True},
    }
    assert formats[1] is not None and formats[1].reply_schema() == {"type": "object"}
    assert formats[2] is None


def test_the_agent_refuses_a_response_format(server) -> None:
    url, engine = server
    with pytest.raises(openai.BadRequestError, match="response_format"):
        sdk(url).chat.completions.create(
            model="opencomposer-agent", messages=HELLO, response_format={"type": "json_object"}
        )
    assert engine.requests == []


@pytest.mark.parametrize(
    ("method", "path", "status", "shape"),
    [
        ("GET", "/v1/nothing", 404, "openai"),
        ("POST", "/v1/embeddings", 404, "openai"),
        ("GET", "/v1/chat/completions", 405, "openai"),
        ("DELETE", "/v1/models", 405, "openai"),
        ("GET", "/v1/threads/thr_1/nothing", 404, "agent"),
        ("PUT", "/v1/threads", 405, "agent"),
        ("GET", "/nothing", 404, "agent"),
    ],
)
def test_routes_and_methods_that_do_not_exist(server, method, path, status, shape) -> None:
    url, _ = server
    response = httpx.request(method, f"{url}{path}")
    assert response.status_code == status
    if shape == "openai":
        error = openai_error(response)
        assert error["type"] == "invalid_request_error" and path in error["message"]
    else:
        assert set(response.json()["error"]) == {"kind", "message"}
        assert path in response.json()["error"]["message"]
    if status == 405:
        assert response.headers.get("allow")


def test_the_sdk_reads_a_missing_route_as_not_found(server) -> None:
    url, _ = server
    with pytest.raises(openai.NotFoundError):
        sdk(url).embeddings.create(model=MODEL, input="x")
