"""The `openai` backend against what real servers do, replayed from llama.cpp's and
llama-cpp-python's recorded habits (tests/support/streams/llamacpp*): non-streamed requests
for callers that wait, tool calls that cannot stream, usage that is or is not sent, windows
asked of the server, overflows that arrive as broken streams, and model names."""

import socket

import pytest
from support.fake_openai import HangUp, Replay, Status, Whole, recorded
from support.openai_backend import HELLO, collect, collect_until_error, make_engine

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    ChatMessage,
    Finished,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    TextDelta,
    TextPrompt,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    ToolSpec,
    Usage,
    complete,
)
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineProtocolError,
    EngineStreamInterrupted,
)
from opencomposer.serving.engines.openai import OpenAIEngine
from opencomposer.serving.engines.upstream_window import props_url, window_from_props

GGUF = "/models/SmolLM2-135M-Instruct-Q8_0.gguf"
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
WITH_TOOLS = GenerationRequest(
    messages=[ChatMessage(role="user", content="what is in calc.py?")],
    tools=[READ_FILE],
    tool_choice="auto",
)
READ_CALC = ToolCall(
    id="call__0_read_file_cmpl-1f8e3c2a-6b9d-4a71-8e05-d3c4b2a19f60",
    name="read_file",
    arguments='{"path": "calc.py"}',
)


def long_prompt(tokens: int, **fields) -> GenerationRequest:
    """A request whose prompt is estimated at about `tokens` tokens (3 characters each)."""
    return GenerationRequest(
        messages=[ChatMessage(role="user", content="x" * 3 * tokens)], **fields
    )


def llamacpp_python(fake) -> None:
    fake.models = recorded("llamacpp_python_models")["data"]


def llamacpp(fake) -> None:
    fake.models = recorded("llamacpp_models")["data"]
    fake.props = recorded("llamacpp_props")


def streamed(fake) -> list[bool]:
    return [bool(r["body"].get("stream")) for r in fake.requests]


# ---------------------------------------------------------------- streaming or not


async def test_a_caller_that_does_not_stream_gets_a_whole_reply_with_usage(fake):
    llamacpp_python(fake)
    fake.enqueue(Whole("llamacpp_python_text_reply"))
    request = HELLO.model_copy(update={"stream": False})
    events = await collect(make_engine(fake, model=GGUF), request)
    assert events == [
        TextDelta("calc.py defines add(a, b)."),
        Finished(
            GenerationResult(
                text="calc.py defines add(a, b).",
                usage=Usage(prompt_tokens=455, completion_tokens=11),
                model=GGUF,
            )
        ),
    ]
    # Nothing but what was asked for: no stream fields, no defaults of ours.
    assert fake.requests[0]["body"] == {
        "model": GGUF,
        "messages": [{"role": "user", "content": "hi"}],
    }


async def test_a_streamed_request_adds_nothing_the_caller_did_not_ask_for(fake):
    fake.enqueue(Replay("llamacpp_python_text"))
    request = WITH_TOOLS.model_copy(update={"tool_choice": None})
    await collect(make_engine(fake), request)
    assert fake.requests[0]["body"] == {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "what is in calc.py?"}],
        "tools": [READ_FILE.to_openai()],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.parametrize(
    "nothing",
    [Replay("llamacpp_python_empty"), Replay("llamacpp_python_empty", die_after=0), HangUp()],
    ids=["ended", "dropped", "hung-up-unanswered"],
)
async def test_an_empty_tool_stream_is_asked_again_whole_and_remembered(fake, nothing):
    llamacpp_python(fake)
    fake.enqueue(
        nothing,
        Whole("llamacpp_python_tool_reply"),
        Whole("llamacpp_python_text_reply"),
        Replay("llamacpp_python_text"),
    )
    engine = make_engine(fake, model=GGUF)
    events = [event async for event in engine.generate(WITH_TOOLS)]
    assert events == [
        ToolCallStarted(0, READ_CALC.id, "read_file"),
        ToolCallArgumentsDelta(0, READ_CALC.arguments),
        Finished(
            GenerationResult(
                tool_calls=[READ_CALC],
                finish_reason="tool_calls",
                usage=Usage(prompt_tokens=412, completion_tokens=9),
                model=GGUF,
            )
        ),
    ]
    # Later requests with tools go whole at once; one without tools still streams.
    await complete(engine, WITH_TOOLS)
    await collect(engine, HELLO)
    assert streamed(fake) == [True, False, False, True]
    assert "stream_options" not in fake.requests[1]["body"]


async def test_the_whole_retry_survives_the_broken_streams_stale_connection(fake):
    """Against the real llama-cpp-python 0.3.36 the whole retry first met the connection the
    broken stream left behind, already closed by the server: it is tried once more."""
    llamacpp_python(fake)
    fake.enqueue(
        Replay("llamacpp_python_empty", die_after=0),
        HangUp(),  # the stale connection: taken, and dropped unanswered
        Whole("llamacpp_python_tool_reply"),
    )
    result = await complete(make_engine(fake, model=GGUF), WITH_TOOLS)
    assert result.tool_calls == [READ_CALC]
    assert streamed(fake) == [True, False, False]


@pytest.mark.parametrize("request_", [HELLO, WITH_TOOLS], ids=["text", "with-tools"])
async def test_a_server_that_is_not_there_is_unreachable_not_a_hang_up(request_):
    """Nothing listens: that is no answer to retry whole, whatever the request holds."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed again before the engine connects
    engine = OpenAIEngine(
        EngineSettings(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    )
    _, exc = await collect_until_error(engine, request_.model_copy(update={"model": "m"}))
    assert exc.kind == "engine_unavailable" and "cannot reach the model server" in exc.message


async def test_a_hang_up_without_tools_is_the_server_failing_not_a_stream_to_retry(fake):
    fake.enqueue(HangUp(), Whole("llamacpp_python_text_reply"))
    _, exc = await collect_until_error(make_engine(fake), HELLO)
    assert exc.kind == "engine_unavailable"
    assert streamed(fake) == [True]


async def test_an_empty_stream_without_tools_is_an_interruption_not_retried(fake):
    fake.enqueue(Replay("llamacpp_python_empty"), Whole("llamacpp_python_text_reply"))
    _, exc = await collect_until_error(make_engine(fake), HELLO)
    assert isinstance(exc, EngineStreamInterrupted)
    assert (exc.kind, "empty stream" in str(exc)) == ("engine_stream_interrupted", True)
    assert streamed(fake) == [True]


async def test_a_text_completion_that_does_not_stream_is_read_whole(fake):
    fake.enqueue(
        Whole(
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": "fake-model",
                "choices": [{"index": 0, "text": " b", "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        )
    )
    request = GenerationRequest(prompt=TextPrompt(prefix="a +"), stream=False)
    events = await collect(make_engine(fake), request)
    assert events == [
        TextDelta(" b"),
        Finished(GenerationResult(text=" b", usage=Usage(3, 1), model="fake-model")),
    ]
    assert fake.requests[0]["path"].endswith("/v1/completions")
    assert fake.requests[0]["body"] == {"model": "fake-model", "prompt": "a +"}


async def test_a_malformed_whole_reply_is_a_protocol_error(fake):
    fake.enqueue(Whole({"choices": [{"index": 0, "message": "oops", "finish_reason": "stop"}]}))
    whole = HELLO.model_copy(update={"stream": False})
    _, exc = await collect_until_error(make_engine(fake), whole)
    assert isinstance(exc, EngineProtocolError)
    assert "message is 'oops'" in str(exc)


# ---------------------------------------------------------------- usage and tool calls


async def test_a_stream_without_usage_reports_none(fake):
    fake.enqueue(Replay("llamacpp_python_text"))
    events = await collect(make_engine(fake, model=GGUF))
    assert events[-1] == Finished(
        GenerationResult(text="The test passes.", finish_reason="stop", usage=None, model=GGUF)
    )


async def test_a_forced_tool_call_naming_its_function_in_every_chunk_is_one_call(fake):
    fake.enqueue(Replay("llamacpp_python_forced_tool"))
    request = WITH_TOOLS.model_copy(update={"tool_choice": "read_file"})
    events = await collect(make_engine(fake, model=GGUF), request)
    result = events[-1].result
    assert result.tool_calls == [
        ToolCall(
            id="call__0_read_file_cmpl-7d2e9b14-3a6c-4e8f-b1d0-5c9a8e7f6b32",
            name="read_file",
            arguments='{"path": "calc.py"}',
        )
    ]
    assert (result.finish_reason, result.usage) == ("tool_calls", None)
    assert fake.requests[0]["body"]["tool_choice"] == {
        "type": "function",
        "function": {"name": "read_file"},
    }


# ---------------------------------------------------------------- the context window


async def test_llama_cpp_says_its_window_in_props(fake):
    llamacpp(fake)
    assert await make_engine(fake).models() == [ModelInfo(GGUF, 8192, "llamacpp")]


async def test_a_listed_window_is_taken_over_props(fake):
    fake.props = recorded("llamacpp_props")  # the default model lists max_model_len 8192 ...
    fake.models = [{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 1024}]
    assert await make_engine(fake).models() == [ModelInfo("m", 1024, "vllm")]


async def test_props_is_asked_once(fake):
    llamacpp(fake)
    engine = make_engine(fake)
    await engine.models()
    assert (await engine.models())[0].context_window == 8192
    assert fake.props_requests == 1
    llamacpp_python(fake)  # a server without /props is not asked again either
    fake.props = None
    engine = make_engine(fake, context_window=2048)
    for _ in range(2):
        assert (await engine.models())[0].context_window == 2048
    assert fake.props_requests == 2


@pytest.mark.parametrize(("configured", "window"), [(4096, 4096), (None, None)])
async def test_a_server_that_says_nothing_has_the_configured_window(fake, configured, window):
    llamacpp_python(fake)  # no max_model_len, and /props is a 404
    engine = make_engine(fake, context_window=configured)
    assert await engine.models() == [ModelInfo(GGUF, window, "me")]


def test_props_window_is_read_where_each_version_puts_it():
    assert window_from_props(recorded("llamacpp_props")) == 8192
    assert window_from_props({"n_ctx": 4096, "total_slots": 1}) == 4096
    assert window_from_props({"default_generation_settings": {"n_ctx": 0}}) is None
    assert window_from_props({"model_path": GGUF}) is None
    assert props_url("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/props"


# ---------------------------------------------------------------- overflow


@pytest.mark.parametrize(
    "scenario",
    [Replay("llamacpp_python_empty", die_after=0), Replay("llamacpp_overflow_error")],
    ids=["llama-cpp-python", "llama.cpp error line"],
)
async def test_a_broken_stream_near_the_window_is_an_overflow(fake, scenario):
    llamacpp(fake)
    fake.enqueue(scenario)
    _, exc = await collect_until_error(make_engine(fake, model=GGUF), long_prompt(7000))
    assert isinstance(exc, ContextLengthExceeded)
    assert "8192 tokens" in str(exc)


async def test_a_broken_stream_far_from_the_window_stays_an_interruption(fake):
    llamacpp(fake)
    fake.enqueue(Replay("llamacpp_python_text", die_after=2))
    _, exc = await collect_until_error(make_engine(fake, model=GGUF), long_prompt(2000))
    assert type(exc) is EngineStreamInterrupted


async def test_a_stream_cut_without_a_known_window_stays_an_interruption(fake):
    llamacpp_python(fake)
    fake.enqueue(Replay("llamacpp_python_empty", die_after=0))
    _, exc = await collect_until_error(make_engine(fake, model=GGUF), long_prompt(30000))
    assert isinstance(exc, EngineStreamInterrupted)
    assert not isinstance(exc, ContextLengthExceeded)


async def test_an_overflow_error_event_is_an_overflow_whatever_the_prompt(fake):
    fake.enqueue(Replay("llamacpp_overflow_data_error"))
    _, exc = await collect_until_error(make_engine(fake))
    assert isinstance(exc, ContextLengthExceeded)
    assert "exceeds the available context size" in str(exc)


async def test_an_overflowing_tool_request_is_refused_whole_and_not_remembered(fake):
    llamacpp_python(fake)
    fake.enqueue(
        Replay("llamacpp_python_empty"),
        Status(400, recorded("llamacpp_python_overflow")),
        Replay("llamacpp_python_forced_tool"),
    )
    engine = make_engine(fake, model=GGUF)
    request = long_prompt(9000, tools=[READ_FILE], tool_choice="auto")
    with pytest.raises(ContextLengthExceeded) as caught:
        await complete(engine, request)
    exc = caught.value
    assert "maximum context length is 8192" in str(exc)
    # The empty stream was the overflow, not a server that cannot stream tools.
    await collect(engine, WITH_TOOLS)
    assert streamed(fake) == [True, False, True]


# ---------------------------------------------------------------- model names


async def test_an_alias_is_sent_as_the_servers_id_and_listed_with_its_window(fake):
    llamacpp(fake)
    fake.enqueue(Replay("llamacpp_python_text"))
    engine = make_engine(fake, model=None, model_aliases={"smollm2": GGUF})
    assert await engine.models() == [
        ModelInfo(GGUF, 8192, "llamacpp"),
        ModelInfo("smollm2", 8192, "llamacpp"),
    ]
    await collect(engine, HELLO.model_copy(update={"model": "smollm2"}))
    assert fake.requests[0]["body"]["model"] == GGUF


async def test_a_configured_alias_is_the_default_model(fake):
    fake.enqueue(Replay("llamacpp_python_text"))
    await collect(make_engine(fake, model="smollm2", model_aliases={"smollm2": GGUF}))
    assert fake.requests[0]["body"]["model"] == GGUF
