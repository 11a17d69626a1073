"""Logprobs as the official `openai` SDK sees them from a live server: with the real tiny
model, each token's text, bytes and alternatives (chat), the legacy object with offsets into
the returned text (completions), the streamed ones; and the rendering of what an engine
reports (pieces of a character, impossible alternatives, backends that give only ids)."""

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from support.live_server import live_server

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    GenerationResult,
    SampledToken,
    TokenLogprob,
    TokenTrace,
    Usage,
)
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.engines.replay import ReplayEngine

HELLO = [{"role": "user", "content": "hello"}]


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def tiny(tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a server running the tiny model on the embedded engine."""
    settings = EngineSettings(
        model="tiny-moe", device="cpu", kv_cache_tokens=2048, speculative="none"
    )
    engine = EmbeddedEngine(settings, tiny_models_dir)
    with live_server(engine, tmp_path_factory.mktemp("home")) as url:
        yield url


def test_chat_tokens_have_their_text_bytes_and_alternatives(tiny: str):
    done = client(tiny).chat.completions.create(
        model="tiny-moe",
        messages=HELLO,
        max_tokens=12,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
    )
    content = done.choices[0].message.content
    tokens = done.choices[0].logprobs.content
    assert len(tokens) == done.usage.completion_tokens == 12
    assert "".join(t.token for t in tokens) == content
    assert b"".join(bytes(t.bytes) for t in tokens).decode() == content
    for token in tokens:
        assert bytes(token.bytes).decode() == token.token
        top = token.top_logprobs
        assert len(top) == 3
        assert [a.logprob for a in top] == sorted((a.logprob for a in top), reverse=True)
        assert all(bytes(a.bytes).decode("utf-8", "backslashreplace") == a.token for a in top)
        # Greedy: the chosen token is the most likely one, with the same logprob.
        assert (top[0].token, top[0].logprob) == (token.token, pytest.approx(token.logprob))


def test_sampled_tokens_have_the_logprob_of_their_alternative(tiny: str):
    # The random model's distribution is nearly flat: so tight a nucleus keeps a few tokens,
    # all among the five alternatives, the rest of the vocabulary impossible.
    done = client(tiny).chat.completions.create(
        model="tiny-moe",
        messages=HELLO,
        max_tokens=16,
        temperature=1.0,
        top_p=0.001,
        seed=4,
        logprobs=True,
        top_logprobs=5,
    )
    tokens = done.choices[0].logprobs.content
    assert len(tokens) == 16
    for token in tokens:
        entry = next(a for a in token.top_logprobs if a.token == token.token)
        assert entry.logprob == pytest.approx(token.logprob)
        assert token.top_logprobs[-1].logprob == -9999.0  # what top-p removed
    # Renormalized over the nucleus: far likelier than under the raw flat softmax.
    assert all(t.logprob > -3 for t in tokens)
    assert any(t.token != t.top_logprobs[0].token for t in tokens)  # sampled, not greedy


def test_streamed_chat_logprobs_ride_on_the_chunks_of_their_text(tiny: str):
    asked = dict(
        model="tiny-moe",
        messages=HELLO,
        max_tokens=10,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    chunks = [c for c in client(tiny).chat.completions.create(**asked, stream=True) if c.choices]
    with_text = [c for c in chunks if c.choices[0].delta.content]
    assert len(with_text) > 1
    for chunk in with_text:  # each token's text is in the chunk that carries it
        tokens = chunk.choices[0].logprobs.content
        text = b"".join(bytes(t.bytes) for t in tokens).decode("utf-8", "replace")
        assert chunk.choices[0].delta.content in text
        assert all(len(t.top_logprobs) == 2 for t in tokens)
    streamed = [t for c in chunks if c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    whole = client(tiny).chat.completions.create(**asked).choices[0].logprobs.content
    assert [t.model_dump() for t in streamed] == [t.model_dump() for t in whole]
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "".join(t.token for t in streamed) == content


def test_streamed_completion_logprobs_count_offsets_on_across_chunks(tiny: str):
    asked = dict(model="tiny-moe", prompt="def add(a, b):", max_tokens=8, temperature=0, logprobs=2)
    whole = client(tiny).completions.create(**asked, echo=True).choices[0].logprobs
    chunks = list(client(tiny).completions.create(**asked, echo=True, stream=True))
    parts = [c.choices[0].logprobs for c in chunks if c.choices and c.choices[0].logprobs]
    assert len(parts) > 1
    joined = {
        key: [value for part in parts for value in getattr(part, key)]
        for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset")
    }
    assert joined == {key: getattr(whole, key) for key in joined}


def test_completion_logprobs_offsets_index_the_echoed_text(tiny: str):
    prompt = "def add(a, b):"
    done = client(tiny).completions.create(
        model="tiny-moe", prompt=prompt, max_tokens=8, temperature=0, logprobs=2, echo=True
    )
    text, logprobs = done.choices[0].text, done.choices[0].logprobs
    assert text.startswith(prompt)
    assert len(logprobs.tokens) == len(logprobs.token_logprobs) == 8
    assert logprobs.text_offset[0] == len(prompt)
    whole = [
        (token, offset)
        for token, offset in zip(logprobs.tokens, logprobs.text_offset, strict=True)
        if "\\x" not in token  # not a piece of a character (the random model emits some)
    ]
    assert whole
    for token, offset in whole:
        assert text[offset : offset + len(token)] == token
    for token, logprob, top in zip(
        logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs, strict=True
    ):
        assert 2 <= len(top) <= 3 and top[token] == pytest.approx(logprob)
        assert logprob == pytest.approx(max(top.values()))  # greedy


def replay_server(tmp_path: Path, trace: TokenTrace, text: str):
    result = GenerationResult(text=text, usage=Usage(2, 2), tokens=trace)
    return live_server(ReplayEngine([result, result]), tmp_path)


def test_pieces_of_a_character_and_impossible_alternatives(tmp_path: Path):
    # "你" is e4 bd a0, sampled as two tokens; top-p removed the second alternative.
    first = SampledToken(
        "\\xe4\\xbd", b"\xe4\xbd", -0.5, (TokenLogprob("\\xe4\\xbd", b"\xe4\xbd", -0.5),)
    )
    second = SampledToken(
        "\\xa0",
        b"\xa0",
        -0.25,
        (TokenLogprob("\\xa0", b"\xa0", -0.25), TokenLogprob("x", b"x", float("-inf"))),
    )
    trace = TokenTrace(logprobs=[-0.5, -0.25, -1.0], sampled=[first, second])
    trace.sampled.append(SampledToken("!", b"!", -1.0))
    with replay_server(tmp_path, trace, "你!") as url:
        sdk = client(url)
        chat = sdk.chat.completions.create(
            model="replay", messages=HELLO, logprobs=True, top_logprobs=2
        )
        text = sdk.completions.create(model="replay", prompt="ab", logprobs=1, echo=True)
    content = chat.choices[0].logprobs.content
    assert b"".join(bytes(t.bytes) for t in content).decode() == "你!"
    assert [a.logprob for a in content[1].top_logprobs] == [-0.25, -9999.0]
    legacy = text.choices[0].logprobs
    assert text.choices[0].text == "ab你!"
    # Both pieces start where the character does; the next token after it.
    assert legacy.text_offset == [2, 2, 3]
    assert legacy.top_logprobs[1] == {"\\xa0": -0.25}  # one alternative: the sampled token


def test_top_logprobs_need_logprobs(tmp_path: Path):
    with (
        replay_server(tmp_path, TokenTrace(), "x") as url,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        client(url).chat.completions.create(model="replay", messages=HELLO, top_logprobs=2)
    assert caught.value.body["param"] == "top_logprobs"
    assert "needs logprobs" in caught.value.body["message"]
