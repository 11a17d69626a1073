"""The engine loop on a tiny Llama: continuous batching, chunked prefill, prefix reuse,
preemption, aborts, sampling and stops, each checked against transformers' own generation or
against the same request run alone."""

from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, Sequence

PROMPTS = [[1, 2, 3, 4, 5, 6, 7], [9, 8, 7], list(range(20, 61)), [5]]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LlamaForCausalLM]:
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=512,
    )
    reference = LlamaForCausalLM(config).eval()
    reference.generation_config.eos_token_id = None  # compare fixed lengths
    folder = tmp_path_factory.mktemp("tiny-llama")
    reference.save_pretrained(folder)
    return folder, reference


def engine(folder: Path, **config) -> LLMEngine:
    defaults = {"block_size": 4, "kv_cache_tokens": 1024, "max_batch_tokens": 64}
    return LLMEngine(load_model(folder), EngineConfig(**{**defaults, **config}))


def reference_greedy(model: LlamaForCausalLM, prompt: list[int], tokens: int) -> list[int]:
    out = model.generate(
        torch.tensor([prompt]), max_new_tokens=tokens, do_sample=False, pad_token_id=0
    )
    return out[0, len(prompt) :].tolist()


def test_batched_greedy_matches_transformers(tiny_llama) -> None:
    folder, reference = tiny_llama
    # A 16-token budget prefills the 41-token prompt in chunks while the others decode.
    seqs = engine(folder, max_batch_tokens=16).generate(PROMPTS, SamplingOptions(max_tokens=12))
    for prompt, seq in zip(PROMPTS, seqs, strict=True):
        assert seq.output_ids == reference_greedy(reference, prompt, 12)
        assert seq.finish_reason == "length"


def test_a_request_decoded_with_others_equals_it_alone(tiny_llama) -> None:
    folder, _ = tiny_llama
    options = SamplingOptions(temperature=0.9, top_p=0.9, seed=11, max_tokens=10, logprobs=True)
    together = engine(folder).generate(PROMPTS, options)
    for prompt, seq in zip(PROMPTS, together, strict=True):
        [alone] = engine(folder).generate([prompt], options)
        assert seq.output_ids == alone.output_ids
        assert seq.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert len(seq.logprobs) == 10 and all(lp <= 0 for lp in seq.logprobs)


def test_a_shared_prefix_is_reused_and_gives_the_same_tokens(tiny_llama) -> None:
    folder, reference = tiny_llama
    llm = engine(folder)
    first_prompt = list(range(30, 70))
    [first] = llm.generate([first_prompt], SamplingOptions(max_tokens=6))
    follow_up = [*first.token_ids, 3, 4, 5]  # the next turn of the same conversation
    # The first request left 45 computed tokens (40 + 5 of its 6 outputs): 11 full blocks of
    # 4 that the follow-up finds in the cache instead of computing them again.
    probe = Sequence(follow_up, SamplingOptions())
    llm.blocks.allocate_prompt(probe)
    assert probe.num_cached == 44
    llm.blocks.free(probe)
    [second] = llm.generate([follow_up], SamplingOptions(max_tokens=6))
    assert second.output_ids == reference_greedy(reference, follow_up, 6)


def test_preemption_under_a_small_cache_still_finishes_correctly(tiny_llama) -> None:
    folder, reference = tiny_llama
    # 20 blocks of 4 tokens cannot hold all four requests at once.
    seqs = engine(folder, kv_cache_tokens=80).generate(PROMPTS, SamplingOptions(max_tokens=12))
    for prompt, seq in zip(PROMPTS, seqs, strict=True):
        assert seq.output_ids == reference_greedy(reference, prompt, 12)


def test_a_prompt_larger_than_the_cache_is_refused(tiny_llama) -> None:
    folder, _ = tiny_llama
    [seq] = engine(folder, kv_cache_tokens=16).generate([list(range(40))], SamplingOptions())
    assert (seq.finish_reason, seq.output_ids) == ("length", [])


def test_stop_tokens_and_aborts(tiny_llama) -> None:
    folder, reference = tiny_llama
    expected = reference_greedy(reference, PROMPTS[0], 12)
    stop = expected[4]
    [seq] = engine(folder).generate(
        [PROMPTS[0]], SamplingOptions(max_tokens=12, stop_token_ids=frozenset({stop}))
    )
    assert seq.output_ids == expected[: expected.index(stop) + 1]
    assert seq.finish_reason == "stop"

    llm = engine(folder)
    seq = llm.add(PROMPTS[2], SamplingOptions(max_tokens=50))
    llm.step()
    llm.abort(seq)
    assert seq.finished and seq.finish_reason == "abort"
    assert not llm.has_work() and llm.blocks.free_blocks == llm.blocks.num_blocks


def test_empty_prompt_is_an_error(tiny_llama) -> None:
    folder, _ = tiny_llama
    with pytest.raises(ValueError, match="no tokens"):
        engine(folder).add([], SamplingOptions())
