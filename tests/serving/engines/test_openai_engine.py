"""The `openai` backend against a real HTTP server replaying recorded streams: it assembles
exactly, or fails with a typed error, and never hangs."""

import socket
from contextlib import aclosing

import numpy as np
import pytest
from support.cancelling import cancel_after_first_event
from support.fake_openai import Endless, Replay, Status
from support.openai_backend import HELLO, collect, collect_until_error, make_engine

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    Capture,
    Finished,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ReasoningDelta,
    ResponseFormat,
    SampledToken,
    SamplingParams,
    SpecDecodeStats,
    TextDelta,
    TextPrompt,
    TokenLogprob,
    TokensSampled,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    ToolSpec,
    Usage,
    complete,
)
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineAuthError,
    EngineProtocolError,
    EngineRateLimited,
    EngineRequestError,
    EngineServerError,
    EngineStreamInterrupted,
    EngineTimeout,
    EngineUnavailable,
    ModelNotFound,
)
from opencomposer.serving.engines.openai import OpenAIEngine


@pytest.mark.parametrize("split", [None, 7, 1])
async def test_text_stream_is_assembled_whatever_the_tcp_chunking(fake, split):
    fake.enqueue(Replay("text_with_usage", split=split))
    events = await collect(make_engine(fake))
    assert events == [
        TextDelta("Hello"),
        TextDelta(", world"),
        TextDelta("!"),
        Finished(
            GenerationResult(
                text="Hello, world!",
                finish_reason="stop",
                usage=Usage(prompt_tokens=12, completion_tokens=4),
                model="fake-model",
            )
        ),
    ]
    assert fake.requests[0]["body"] == {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_reasoning_is_separated_from_the_answer_and_cached_tokens_reported(fake):
    fake.enqueue(Replay("reasoning"))
    events = await collect(make_engine(fake))
    assert events == [
        ReasoningDelta("The user wants "),
        ReasoningDelta("a greeting."),
        TextDelta("Hi there."),
        Finished(
            GenerationResult(
                text="Hi there.",
                reasoning="The user wants a greeting.",
                usage=Usage(prompt_tokens=20, completion_tokens=9, cached_tokens=16),
                model="deepseek-v3",
            )
        ),
    ]


async def test_tool_call_arguments_fragmented_across_chunks(fake):
    fake.enqueue(Replay("tool_call_fragmented"))
    tool = ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})
    request = GenerationRequest(messages=HELLO.messages, tools=[tool], tool_choice="read_file")
    events = await collect(make_engine(fake), request)
    call = ToolCall(id="call_abc123", name="read_file", arguments='{"path": "src/main.py"}')
    assert events == [
        ToolCallStarted(0, "call_abc123", "read_file"),
        ToolCallArgumentsDelta(0, '{"pa'),
        ToolCallArgumentsDelta(0, 'th": "src/'),
        ToolCallArgumentsDelta(0, 'main.py"}'),
        Finished(
            GenerationResult(
                tool_calls=[call],
                finish_reason="tool_calls",
                usage=Usage(prompt_tokens=50, completion_tokens=18),
                model="fake-model",
            )
        ),
    ]
    assert call.parsed_arguments() == {"path": "src/main.py"}
    body = fake.requests[0]["body"]
    assert body["tools"] == [tool.to_openai()]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert "parallel_tool_calls" not in body  # unset: the upstream's own default


async def test_parallel_tool_calls_is_forwarded_upstream(fake):
    fake.enqueue(Replay("tool_call_fragmented"))
    tool = ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})
    request = GenerationRequest(messages=HELLO.messages, tools=[tool], parallel_tool_calls=False)
    await collect(make_engine(fake), request)
    assert fake.requests[0]["body"]["parallel_tool_calls"] is False


async def test_response_format_is_forwarded_upstream(fake):
    fake.enqueue(Replay("text_with_usage"))
    reply = ResponseFormat(
        type="json_schema", name="verdict", json_schema={"type": "object"}, strict=True
    )
    await collect(make_engine(fake), HELLO.model_copy(update={"response_format": reply}))
    assert fake.requests[0]["body"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": {"type": "object"}, "strict": True},
    }


async def test_parallel_tool_calls_interleaved_by_index(fake):
    fake.enqueue(Replay("parallel_tool_calls", split=13))
    events = await collect(make_engine(fake))
    # A call starts with its first argument fragment: only then is its name known whole.
    assert events[:-1] == [
        TextDelta("Checking both."),
        ToolCallStarted(0, "call_0", "grep"),
        ToolCallArgumentsDelta(0, '{"pattern": '),
        ToolCallStarted(1, "call_1", "glob"),
        ToolCallArgumentsDelta(1, '{"pattern": "**/*.py"}'),
        ToolCallArgumentsDelta(0, '"TODO"}'),
    ]
    assert events[-1].result.tool_calls == [
        ToolCall(id="call_0", name="grep", arguments='{"pattern": "TODO"}'),
        ToolCall(id="call_1", name="glob", arguments='{"pattern": "**/*.py"}'),
    ]


async def test_tool_calls_without_index_and_with_repeated_names(fake):
    fake.enqueue(Replay("tool_calls_without_index"))
    events = await collect(make_engine(fake))
    result = events[-1].result
    assert result.tool_calls == [
        ToolCall(id="c1", name="glob", arguments='{"pattern": "*.md"}'),
        ToolCall(id="c2", name="read_file", arguments='{"path": "README.md"}'),
    ]
    # The server said `stop` although it returned calls.
    assert result.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("stream", "text", "calls"),
    [
        (
            "kimi_text_tool_calls",
            "I'll look.",
            [
                ToolCall(id="functions.grep:0", name="grep", arguments='{"pattern": "def main"}'),
                ToolCall(
                    id="functions.read_file:1", name="read_file", arguments='{"path": "a.py"}'
                ),
            ],
        ),
        (
            "deepseek_text_tool_calls",
            "Sure.",
            [ToolCall(id="gen_0", name="run_command", arguments='{"command": "pytest -q"}')],
        ),
        (
            "hermes_text_tool_call",
            "Let me edit.\n",
            [
                ToolCall(
                    id="gen_0",
                    name="edit_file",
                    arguments='{"path": "x.py", "old": "a", "new": "b"}',
                )
            ],
        ),
    ],
)
async def test_tool_calls_printed_as_text_are_recovered(fake, stream, text, calls):
    fake.enqueue(Replay(stream))
    events = await collect(make_engine(fake))
    result = events[-1].result
    assert (result.text, result.tool_calls, result.finish_reason) == (text, calls, "tool_calls")
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert started == [ToolCallStarted(i, c.id, c.name) for i, c in enumerate(calls)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text


async def test_text_tool_parsing_can_be_turned_off(fake):
    fake.enqueue(Replay("hermes_text_tool_call"))
    result = (await collect(make_engine(fake, text_tool_calls="off")))[-1].result
    assert result.tool_calls == []
    assert result.text.startswith("Let me edit.\n<tool_call>\n{")


async def test_sglang_training_extras_are_requested_and_decoded(fake):
    fake.enqueue(Replay("sglang_extras"))
    capture = Capture(token_ids=True, logprobs=True, routed_experts=True, spec_stats=True)
    request = GenerationRequest(messages=HELLO.messages, capture=capture)
    result = (await collect(make_engine(fake, server_flavor="sglang"), request))[-1].result
    body = fake.requests[0]["body"]
    assert {k: body[k] for k in body if k.startswith("return_") or k == "logprobs"} == {
        "logprobs": True,
        "return_input_ids_in_sglext": True,
        "return_output_ids_in_sglext": True,
        "return_routed_experts": True,
        "return_spec_tokens_details": True,
    }
    tokens = result.tokens
    assert (tokens.prompt_token_ids, tokens.completion_token_ids, tokens.logprobs) == (
        [1, 15, 27],
        [42, 7],
        [-0.25, -1.5],
    )
    # 3 prompt + 2 completion tokens -> 4 routed positions of (2 layers x top-2).
    np.testing.assert_array_equal(
        tokens.routed_experts, np.arange(16, dtype=np.int32).reshape(4, 4)
    )
    assert result.spec == SpecDecodeStats(verify_steps=1, accept_length=2.0, accept_rate=0.5)
    assert result.usage == Usage(prompt_tokens=3, completion_tokens=2, cached_tokens=2)


async def test_upstream_logprobs_are_relayed_with_bytes_and_alternatives(fake):
    fake.enqueue(Replay("logprobs_alternatives"))
    request = GenerationRequest(
        messages=HELLO.messages, capture=Capture(logprobs=True, top_logprobs=2)
    )
    events = await collect(make_engine(fake), request)
    result = events[-1].result
    assert (fake.requests[0]["body"]["logprobs"], fake.requests[0]["body"]["top_logprobs"]) == (
        True,
        2,
    )
    hi, hello = TokenLogprob("Hi", b"Hi", -0.25), TokenLogprob("Hello", b"Hello", -1.75)
    first, second = (
        TokenLogprob("\\xe4\\xbd", b"\xe4\xbd", -0.5),
        TokenLogprob("\\xa0", b"\xa0", -0.125),
    )
    assert result.tokens.sampled == [
        SampledToken("Hi", b"Hi", -0.25, (hi, hello)),
        SampledToken(first.token, first.bytes, -0.5, (first,)),
        SampledToken(second.token, second.bytes, -0.125, (second,)),
    ]
    assert result.tokens.logprobs == [-0.25, -0.5, -0.125]
    assert b"".join(t.bytes for t in result.tokens.sampled).decode() == result.text == "Hi你"
    # Each chunk's tokens are passed on as they come, ahead of the text they spell.
    streamed = [
        [t.token for t in e.tokens] if isinstance(e, TokensSampled) else e.text
        for e in events
        if isinstance(e, TokensSampled | TextDelta)
    ]
    assert streamed == [["Hi"], "Hi", ["\\xe4\\xbd"], ["\\xa0"], "你"]


async def test_vllm_token_ids_are_collected_per_chunk(fake):
    fake.enqueue(Replay("vllm_token_ids"))
    request = GenerationRequest(messages=HELLO.messages, capture=Capture(token_ids=True))
    result = (await collect(make_engine(fake, server_flavor="vllm"), request))[-1].result
    assert fake.requests[0]["body"]["return_token_ids"] is True
    assert (result.tokens.prompt_token_ids, result.tokens.completion_token_ids) == (
        [1, 2, 3],
        [10, 11, 12],
    )
    assert result.finish_reason == "length"


async def test_generic_servers_get_only_standard_fields(fake):
    fake.enqueue(Replay("text_with_usage"))
    request = GenerationRequest(
        messages=HELLO.messages,
        capture=Capture(token_ids=True, routed_experts=True),
        sampling=SamplingParams(temperature=0.2, top_p=0.9, max_tokens=5, stop=["\n"], seed=7),
    )
    await collect(make_engine(fake), request)
    body = fake.requests[0]["body"]
    assert not [k for k in body if k.startswith("return_")]
    assert {k: body[k] for k in ("temperature", "top_p", "max_tokens", "stop", "seed")} == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 5,
        "stop": ["\n"],
        "seed": 7,
    }


async def test_a_text_prompt_goes_to_text_completions_with_its_suffix(fake):
    fake.enqueue(Replay("text_completion"))
    request = GenerationRequest(
        prompt=TextPrompt(prefix="def add(a, b):\n    return ", suffix="\nprint(add(1, 2))"),
        sampling=SamplingParams(max_tokens=8),
        capture=Capture(logprobs=True),
    )
    events = await collect(make_engine(fake), request)
    sent = fake.requests[0]
    assert sent["path"].endswith("/v1/completions")
    assert {k: sent["body"][k] for k in ("prompt", "suffix", "max_tokens", "logprobs")} == {
        "prompt": "def add(a, b):\n    return ",
        "suffix": "\nprint(add(1, 2))",
        "max_tokens": 8,
        "logprobs": 0,
    }
    assert "messages" not in sent["body"] and "tools" not in sent["body"]
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("a + b"), TextDelta("\n")]
    result = events[-1].result
    assert (result.text, result.finish_reason) == ("a + b\n", "stop")
    assert result.usage == Usage(prompt_tokens=9, completion_tokens=4)
    assert result.tokens.logprobs == [-0.1, -0.2, -0.3, -0.5]
    assert [t.token for t in result.tokens.sampled] == ["a", " +", " b", "\n"]


@pytest.mark.parametrize(
    ("scenario", "error", "message_part", "partial"),
    [
        (Replay("garbage_chunk"), EngineProtocolError, "not JSON", [TextDelta("par")]),
        (Replay("bad_shape"), EngineProtocolError, "choices", []),
        (Replay("error_event"), EngineServerError, "CUDA out of memory", [TextDelta("Part")]),
        (
            Replay("no_finish_reason"),
            EngineStreamInterrupted,
            "before the generation",
            [TextDelta("cut sho")],
        ),
        (
            Replay("text_with_usage", die_after=2),
            EngineStreamInterrupted,
            "broke mid-stream",
            [TextDelta("Hello")],
        ),
    ],
)
async def test_broken_streams_fail_with_typed_errors(fake, scenario, error, message_part, partial):
    fake.enqueue(scenario)
    events, exc = await collect_until_error(make_engine(fake))
    assert type(exc) is error
    assert message_part in exc.message
    assert events == partial


async def test_a_stalled_stream_times_out_and_hangs_up(fake):
    fake.enqueue(Replay("text_with_usage", stall_after=2))
    events, exc = await collect_until_error(make_engine(fake, idle_timeout=0.5))
    assert type(exc) is EngineTimeout
    assert "engine.idle_timeout" in exc.message
    assert events == [TextDelta("Hello")]
    await fake.wait_for_disconnect()


@pytest.mark.parametrize(
    ("code", "body", "error", "message_part"),
    [
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens. "
                    "However, you requested 9000 tokens.",
                    "code": "context_length_exceeded",
                }
            },
            ContextLengthExceeded,
            "maximum context length",
        ),
        (
            400,
            {"object": "error", "message": "The prompt is too long: 9000 > 8192", "code": 400},
            ContextLengthExceeded,
            "prompt is too long",
        ),
        (
            400,
            {"error": {"message": "temperature must be >= 0"}},
            EngineRequestError,
            "temperature",
        ),
        (
            404,
            {"error": {"message": "The model `nope` does not exist."}},
            ModelNotFound,
            "check engine.model",
        ),
        (401, {"error": {"message": "Invalid API key"}}, EngineAuthError, "engine.api_key"),
        (429, {"error": {"message": "Rate limit reached"}}, EngineRateLimited, "429"),
        (500, {"error": {"message": "boom"}}, EngineServerError, "boom"),
    ],
)
async def test_http_errors_are_typed(fake, code, body, error, message_part):
    fake.enqueue(Status(code, body))
    _, exc = await collect_until_error(make_engine(fake))
    assert type(exc) is error
    assert message_part in exc.message


async def test_server_errors_are_retried_before_any_output(fake):
    fake.enqueue(Status(503, {"error": {"message": "warming up"}}), Replay("text_with_usage"))
    events = await collect(make_engine(fake, max_retries=1))
    assert events[-1].result.text == "Hello, world!"
    assert len(fake.requests) == 2


async def test_refused_connection_is_unavailable():
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = EngineSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0)
    engine = OpenAIEngine(settings)
    with pytest.raises(EngineUnavailable, match=f"127.0.0.1:{port}"):
        await complete(engine, HELLO)
    await engine.aclose()


async def test_closing_the_stream_hangs_up_upstream(fake):
    fake.enqueue(Endless())
    engine = make_engine(fake)
    seen = 0
    async with aclosing(engine.generate(HELLO)) as stream:
        async for _ in stream:
            seen += 1
            if seen == 3:
                break
    await fake.wait_for_disconnect()
    await engine.aclose()


async def test_cancelling_the_consumer_hangs_up_upstream(fake):
    fake.enqueue(Endless())
    engine = make_engine(fake)
    await cancel_after_first_event(lambda: engine.generate(HELLO), timeout=5)
    await fake.wait_for_disconnect()
    await engine.aclose()


async def test_models_and_default_model_resolution(fake):
    fake.enqueue(Replay("text_with_usage"))
    engine = make_engine(fake)
    assert await engine.models() == [ModelInfo("fake-model", context_window=8192, owned_by="tests")]
    unset = OpenAIEngine(EngineSettings(base_url=fake.base_url, max_retries=0))
    result = await complete(unset, HELLO)
    assert result.text == "Hello, world!"
    assert fake.requests[0]["body"]["model"] == "fake-model"
    await unset.aclose()
    await engine.aclose()
