"""`POST /v1/completions` as the official `openai` SDK and raw HTTP see it: raw prompts and
fill-in-the-middle reaching the engine as text prompts, streaming, echo, logprobs, errors; and
the embedded tiny model filling a middle for real."""

import json
from pathlib import Path

import httpx
import openai
import pytest
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import GenerationResult, TextPrompt, TokenTrace, Usage
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.engines.errors import ContextLengthExceeded
from opencomposer.serving.engines.replay import ReplayEngine

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\nprint(add(1, 2))\n"


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_fill_in_the_middle_reaches_the_engine_as_a_text_prompt(tmp_path: Path):
    engine = ScriptedEngine([Reply(text="a + b", usage=(11, 3))])
    with live_server(engine, tmp_path) as url:
        done = client(url).completions.create(
            model="scripted-model",
            prompt=PREFIX,
            suffix=SUFFIX,
            max_tokens=32,
            temperature=0.2,
            stop=["\n\n"],
            seed=3,
        )
    assert done.object == "text_completion"
    assert done.id.startswith("cmpl-")
    assert (done.choices[0].text, done.choices[0].finish_reason) == ("a + b", "stop")
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (11, 3)
    request = engine.requests[0]
    assert request.messages == [] and request.tools == []
    assert request.prompt == TextPrompt(prefix=PREFIX, suffix=SUFFIX)
    sampling = request.sampling
    assert (sampling.max_tokens, sampling.temperature, sampling.stop, sampling.seed) == (
        32,
        0.2,
        ["\n\n"],
        3,
    )


def test_openai_defaults_raw_prompts_in_a_list_and_echo(tmp_path: Path):
    engine = ScriptedEngine([Reply(text=" world"), Reply(text="!")])
    with live_server(engine, tmp_path) as url:
        sdk = client(url)
        echoed = sdk.completions.create(model="scripted-model", prompt="hello", echo=True)
        listed = sdk.completions.create(model="scripted-model", prompt=["hi"])
    assert echoed.choices[0].text == "hello world"
    assert listed.choices[0].text == "!"
    # OpenAI's default for this endpoint is 16 tokens.
    assert [r.sampling.max_tokens for r in engine.requests] == [16, 16]
    assert [r.prompt for r in engine.requests] == [
        TextPrompt(prefix="hello"),
        TextPrompt(prefix="hi"),
    ]


async def test_stream_sends_text_pieces_finish_usage_then_done(tmp_path: Path):
    engine = ScriptedEngine([Reply(text="return a + b", usage=(9, 4)), Reply(text="y")])
    with live_server(engine, tmp_path) as url:
        sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        stream = await sdk.completions.create(
            model="scripted-model",
            prompt=PREFIX,
            suffix=SUFFIX,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        with httpx.stream(
            "POST",
            f"{url}/v1/completions",
            json={"model": "scripted-model", "prompt": "x", "stream": True},
        ) as raw:
            payloads = [
                line.removeprefix("data: ")
                for line in raw.iter_lines()
                if line.startswith("data: ")
            ]
    assert all(c.object == "text_completion" for c in chunks)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "return a + b"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 4
    # Without include_usage: text, then the finish, then [DONE].
    assert payloads[-1] == "[DONE]"
    frames = [json.loads(p) for p in payloads[:-1]]
    assert [f["choices"][0]["text"] for f in frames] == ["y", ""]
    assert [f["choices"][0]["finish_reason"] for f in frames] == [None, "stop"]
    assert all("usage" not in f for f in frames)


def test_logprobs_name_token_ids(tmp_path: Path):
    result = GenerationResult(
        text="ab",
        usage=Usage(2, 2),
        tokens=TokenTrace(completion_token_ids=[5, 6], logprobs=[-0.5, -1.0]),
    )
    with live_server(ReplayEngine([result]), tmp_path) as url:
        done = client(url).completions.create(model="replay", prompt="x", logprobs=0)
    logprobs = done.choices[0].logprobs
    assert logprobs.tokens == ["token_id:5", "token_id:6"]
    assert logprobs.token_logprobs == [-0.5, -1.0]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "scripted-model", "prompt": "x", "n": 2}, "n"),
        ({"model": "scripted-model", "prompt": "x", "best_of": 3}, "best_of"),
        ({"model": "scripted-model", "prompt": ["a", "b"]}, "prompt"),
        ({"model": "scripted-model", "prompt": [1, 2, 3]}, "prompt"),
        ({"model": "scripted-model"}, "prompt"),
        ({"model": "scripted-model", "prompt": "x", "logprobs": 6}, "logprobs"),
        ({"model": "scripted-model", "prompt": "x", "suffix": "y", "echo": True}, "echo"),
        ({"model": "scripted-model", "prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x"}, "model"),
    ],
)
def test_bad_requests_are_openai_400s_and_never_reach_the_engine(tmp_path: Path, body, param):
    engine = ScriptedEngine([])
    with live_server(engine, tmp_path) as url:
        response = httpx.post(f"{url}/v1/completions", json=body)
        assert httpx.get(f"{url}/healthz").status_code == 200
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] is not None and error["param"].startswith(param)
    assert engine.requests == []


def test_agent_and_unknown_models_and_engine_errors(tmp_path: Path):
    engine = ScriptedEngine([Reply(error=ContextLengthExceeded("the prompt is too long"))])
    with live_server(engine, tmp_path) as url:
        sdk = client(url)
        with pytest.raises(openai.BadRequestError) as agent:
            sdk.completions.create(model="opencomposer-agent", prompt="x")
        with pytest.raises(openai.NotFoundError) as unknown:
            sdk.completions.create(model="gpt-9", prompt="x")
        with pytest.raises(openai.BadRequestError) as too_long:
            sdk.completions.create(model="scripted-model", prompt="x" * 100, stream=True)
    assert agent.value.body["code"] == "model_not_supported"
    assert unknown.value.body["code"] == "model_not_found"
    assert too_long.value.body["code"] == "context_length_exceeded"


def test_a_suffix_the_model_cannot_fill_is_refused_not_ignored(tmp_path: Path):
    engine = ScriptedEngine([Reply(text="continued")], fills_middle=False)
    with live_server(engine, tmp_path) as url:
        sdk = client(url)
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.completions.create(model="scripted-model", prompt=PREFIX, suffix=SUFFIX)
        with pytest.raises(openai.BadRequestError) as empty:  # an empty suffix is a suffix
            sdk.completions.create(model="scripted-model", prompt=PREFIX, suffix="")
        # Without a suffix the same model continues the prompt.
        plain = sdk.completions.create(model="scripted-model", prompt=PREFIX)
    body = refused.value.body
    assert (body["code"], body["param"]) == ("fim_not_supported", "suffix")
    assert "scripted-model" in body["message"] and "tiny-moe" in body["message"]
    assert empty.value.body["code"] == "fim_not_supported"
    assert plain.choices[0].text == "continued"
    assert len(engine.requests) == 1  # the refused requests never reached the engine


@pytest.mark.parametrize("fills_middle", [True, None], ids=["fim-model", "remote-cannot-tell"])
def test_a_suffix_reaches_an_engine_that_fills_or_cannot_tell(tmp_path: Path, fills_middle):
    engine = ScriptedEngine([Reply(text="middle")], fills_middle=fills_middle)
    with live_server(engine, tmp_path) as url:
        done = client(url).completions.create(model="scripted-model", prompt=PREFIX, suffix=SUFFIX)
    assert done.choices[0].text == "middle"
    assert engine.requests[0].prompt == TextPrompt(prefix=PREFIX, suffix=SUFFIX)


def test_the_embedded_tiny_model_fills_a_middle(tmp_path: Path, tiny_models_dir: Path):
    settings = EngineSettings(
        model="tiny-moe", device="cpu", kv_cache_tokens=2048, speculative="none"
    )
    with live_server(EmbeddedEngine(settings, tiny_models_dir), tmp_path) as url:
        sdk = client(url)
        done = sdk.completions.create(
            model="tiny-moe", prompt=PREFIX, suffix=SUFFIX, max_tokens=5, temperature=0
        )
        streamed = list(
            sdk.completions.create(
                model="tiny-moe",
                prompt=PREFIX,
                suffix=SUFFIX,
                max_tokens=5,
                temperature=0,
                stream=True,
            )
        )
    assert 1 <= done.usage.completion_tokens <= 5
    # The FIM prompt is the sentinels plus the two texts: more tokens than either alone.
    assert done.usage.prompt_tokens > 3
    assert "".join(c.choices[0].text for c in streamed if c.choices) == done.choices[0].text
