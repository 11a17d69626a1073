"""MTP speculative decoding in the engine: lossless for greedy decoding whatever the drafts,
rejected drafts rolled back, statistics reported, and the MTP layer's own drafting run on a
DeepSeek-V3 with an MTP layer."""

import time
from dataclasses import replace

import pytest
import torch

from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.loader import (
    DRAFT_VOCAB_FILE,
    ModelLoadError,
    load_model,
)
from opencomposer.serving.engines.embedded.scheduler import Run
from opencomposer.serving.engines.embedded.sequence import SamplingOptions

PROMPTS = [[5, 9, 14, 3, 22, 7], [40, 41, 42], list(range(60, 90))]
TOKENS = 24


def engine(path, **config) -> LLMEngine:
    defaults = {"block_size": 4, "kv_cache_tokens": 512, "max_batch_tokens": 32}
    return LLMEngine(load_model(path), EngineConfig(**{**defaults, **config}))


@pytest.fixture
def checkpoint(dsv3_checkpoint):
    return dsv3_checkpoint(mtp=True, max_position_embeddings=256).path


def plain(path, prompts=PROMPTS) -> list[list[int]]:
    return [
        s.output_ids for s in engine(path).generate(prompts, SamplingOptions(max_tokens=TOKENS))
    ]


@pytest.mark.parametrize("draft_tokens", [1, 3, 5])
def test_greedy_with_mtp_drafts_equals_plain_greedy(checkpoint, draft_tokens: int) -> None:
    expected = plain(checkpoint)
    seqs = engine(checkpoint).generate(
        PROMPTS, SamplingOptions(max_tokens=TOKENS, draft_tokens=draft_tokens, logprobs=True)
    )
    assert [s.output_ids for s in seqs] == expected
    for seq in seqs:
        assert seq.spec.verify_steps > 0 and seq.spec.drafted == draft_tokens * (
            seq.spec.verify_steps
        )
        assert len(seq.logprobs) == TOKENS


def test_accepted_and_rejected_drafts_are_exact(checkpoint, monkeypatch) -> None:
    """Drafts from an oracle that knows the greedy continuation but errs on purpose every few
    tokens: accepted runs must be kept, rejections rolled back, output unchanged."""
    expected = plain(checkpoint)
    llm = engine(checkpoint)
    truth = {tuple(p): p + out for p, out in zip(PROMPTS, expected, strict=True)}

    def oracle(runs: list[Run]) -> None:
        for run in runs:
            seq = run.seq
            full = truth[tuple(seq.token_ids[: seq.prompt_len])]
            at = len(seq.token_ids)
            drafts = full[at : at + 3] + [0] * 3
            if at % 5 == 0:
                drafts[1] = (drafts[1] + 1) % 128  # a wrong second draft
            run.drafts = drafts[:3]
            seq.mtp_len, seq.mtp_hidden = seq.num_cached, []

    monkeypatch.setattr(llm.proposer, "propose", oracle)
    seqs = llm.generate(PROMPTS, SamplingOptions(max_tokens=TOKENS, draft_tokens=3))
    assert [s.output_ids for s in seqs] == expected
    stats = [s.spec for s in seqs]
    assert all(s.accepted > 0 for s in stats)
    # Most drafts are right, so far fewer verify steps than tokens were needed.
    assert all(s.verify_steps < TOKENS * 2 // 3 for s in stats)
    assert all(1.0 < s.accept_length <= 4.0 for s in stats)


def test_after_a_rollback_the_cache_equals_a_fresh_recompute(checkpoint, monkeypatch) -> None:
    prompt = PROMPTS[0]
    [reference] = engine(checkpoint).generate([prompt], SamplingOptions(max_tokens=8))
    llm = engine(checkpoint)

    def always_wrong(runs: list[Run]) -> None:
        for run in runs:
            run.drafts = [127, 126, 125]
            run.seq.mtp_len, run.seq.mtp_hidden = run.seq.num_cached, []

    monkeypatch.setattr(llm.proposer, "propose", always_wrong)
    seq = llm.add(prompt, SamplingOptions(max_tokens=8, draft_tokens=3))
    while not seq.finished:
        llm.step()
    assert seq.output_ids == reference.output_ids
    # Every step wrote KV for 3 rejected drafts after the accepted token; recompute the same
    # tokens from scratch in a fresh engine and compare the next-token logits.
    fresh = engine(checkpoint)
    [again] = fresh.generate([seq.token_ids], SamplingOptions(max_tokens=1, logprobs=True))
    [cont] = llm.generate([seq.token_ids], SamplingOptions(max_tokens=1, logprobs=True))
    assert cont.output_ids == again.output_ids
    assert cont.logprobs == pytest.approx(again.logprobs, abs=1e-5)


def test_stop_token_inside_accepted_drafts_truncates(checkpoint, monkeypatch) -> None:
    expected = plain(checkpoint, [PROMPTS[0]])[0]
    stop = expected[6]
    llm = engine(checkpoint)
    full = PROMPTS[0] + expected

    def oracle(runs: list[Run]) -> None:
        for run in runs:
            at = len(run.seq.token_ids)
            run.drafts = (full[at : at + 4] + [1] * 4)[:4]
            run.seq.mtp_len, run.seq.mtp_hidden = run.seq.num_cached, []

    monkeypatch.setattr(llm.proposer, "propose", oracle)
    [seq] = llm.generate(
        [PROMPTS[0]],
        SamplingOptions(max_tokens=TOKENS, draft_tokens=4, stop_token_ids=frozenset({stop})),
    )
    assert seq.output_ids == expected[: expected.index(stop) + 1]
    assert seq.finish_reason == "stop"


def test_alternatives_with_drafts_are_those_of_plain_decoding(checkpoint) -> None:
    options = SamplingOptions(max_tokens=TOKENS, logprobs=True, top_logprobs=3)
    alone = engine(checkpoint).generate(PROMPTS, options)
    drafted = engine(checkpoint).generate(PROMPTS, replace(options, draft_tokens=3))
    for plain_seq, seq in zip(alone, drafted, strict=True):
        assert seq.spec.verify_steps > 0 and len(seq.top_logprobs) == TOKENS
        assert [[t for t, _ in top] for top in seq.top_logprobs] == [
            [t for t, _ in top] for top in plain_seq.top_logprobs
        ]
        assert [lp for top in seq.top_logprobs for _, lp in top] == pytest.approx(
            [lp for top in plain_seq.top_logprobs for _, lp in top], abs=1e-4
        )
        assert [top[0][0] for top in seq.top_logprobs] == seq.output_ids  # greedy: the best


def test_sampled_speculation_is_seeded_and_valid(checkpoint) -> None:
    options = SamplingOptions(
        temperature=0.8, top_k=20, seed=5, max_tokens=16, draft_tokens=2, logprobs=True
    )
    first = engine(checkpoint).generate(PROMPTS, options)
    again = engine(checkpoint).generate(PROMPTS, options)
    assert [s.output_ids for s in first] == [s.output_ids for s in again]
    for seq in first:
        assert len(seq.output_ids) == 16 and all(-20 < lp <= 0 for lp in seq.logprobs)


def test_each_step_reports_where_its_time_went(checkpoint, monkeypatch) -> None:
    """A prompt's step is no decode step; a speculating one splits its drafts' time from the
    rest, measured around the proposer itself (which here sleeps a known while)."""
    llm = engine(checkpoint)
    propose = llm.proposer.propose

    def slow_propose(runs: list[Run]) -> None:
        time.sleep(0.02)
        propose(runs)

    monkeypatch.setattr(llm.proposer, "propose", slow_propose)
    llm.add(PROMPTS[0], SamplingOptions(max_tokens=4, draft_tokens=2))
    assert llm.last_step is None
    llm.step()
    assert llm.last_step is not None and not llm.last_step.decoding
    assert llm.last_step.drafting == 0.0
    llm.step()
    step = llm.last_step
    assert step.decoding and 0.02 <= step.drafting < step.seconds
    plain = engine(checkpoint)
    plain.add(PROMPTS[0], SamplingOptions(max_tokens=4))
    plain.step()
    plain.step()
    assert plain.last_step is not None and plain.last_step.decoding
    assert plain.last_step.drafting == 0.0 < plain.last_step.seconds


def test_models_without_mtp_refuse_drafting(dsv3_checkpoint) -> None:
    path = dsv3_checkpoint(mtp=False).path
    with pytest.raises(ValueError, match="no MTP layer"):
        engine(path).add([1, 2, 3], SamplingOptions(draft_tokens=2))


def test_routed_experts_are_captured_per_committed_position(checkpoint) -> None:
    seqs = engine(checkpoint).generate(
        PROMPTS, SamplingOptions(max_tokens=10, draft_tokens=3, capture_experts=True)
    )
    for seq in seqs:
        experts = torch.cat(seq.routed_experts)
        # Every position but the last (whose successor was never computed): 2 MoE layers of
        # the 3 (the first is dense), top-2 each.
        assert experts.shape == (len(seq.token_ids) - 1, 2 * 2)
        assert experts.dtype == torch.int32 and int(experts.max()) < 8


def test_a_reused_prefix_still_speculates(checkpoint) -> None:
    llm = engine(checkpoint)
    options = SamplingOptions(max_tokens=TOKENS, draft_tokens=2)
    [first] = llm.generate([PROMPTS[2]], options)
    follow_up = [*first.token_ids, 7, 8, 9]
    [second] = llm.generate([follow_up], options)
    assert second.spec.verify_steps > 0  # drafting went on after the cached prefix
    assert second.output_ids == plain(checkpoint, [follow_up])[0]


def _write_draft_vocab(path, token_ids: list[int]) -> None:
    from safetensors.torch import save_file

    save_file({"token_ids": torch.tensor(token_ids)}, str(path / DRAFT_VOCAB_FILE))


def _drafted(path, prompts=PROMPTS) -> list:
    seqs = engine(path).generate(prompts, SamplingOptions(max_tokens=TOKENS, draft_tokens=3))
    return [(s.output_ids, s.spec.accepted) for s in seqs]


def test_a_draft_vocabulary_of_every_token_drafts_as_the_whole_head(checkpoint) -> None:
    whole = _drafted(checkpoint)
    vocab = load_model(checkpoint).vocab_size
    _write_draft_vocab(checkpoint, list(reversed(range(vocab))))
    assert load_model(checkpoint).draft_token_ids is not None
    assert _drafted(checkpoint) == whole


def test_a_reduced_draft_vocabulary_changes_drafts_never_the_output(checkpoint) -> None:
    expected = plain(checkpoint)
    _write_draft_vocab(checkpoint, [7, 3, 40, 41, 42, 90])
    llm = engine(checkpoint)
    drafted: list[int] = []
    original = llm.model.draft_argmax

    def recording(states: torch.Tensor) -> torch.Tensor:
        ids = original(states)
        drafted.extend(ids.tolist())
        return ids

    llm.model.draft_argmax = recording  # type: ignore[method-assign]
    seqs = llm.generate(PROMPTS, SamplingOptions(max_tokens=TOKENS, draft_tokens=3))
    assert [s.output_ids for s in seqs] == expected
    assert drafted and set(drafted) <= {7, 3, 40, 41, 42, 90}
    assert [s.spec.drafted for s in seqs] != [0, 0, 0]


def test_draft_rows_follow_weight_updates_in_place(checkpoint) -> None:
    model = load_model(checkpoint)
    model.use_draft_vocab(torch.tensor([1, 2, 3]))
    states = torch.rand(4, model.hidden_size) + 0.1

    def point_head_at(token: int) -> None:
        with torch.no_grad():
            model.lm_head.weight[1:4] = 0
            model.lm_head.weight[token] = 1.0

    point_head_at(1)
    assert model.draft_argmax(states).tolist() == [1, 1, 1, 1]
    point_head_at(3)
    assert model.draft_argmax(states).tolist() == [3, 3, 3, 3]


@pytest.mark.parametrize("token_ids", [[], [1, 1], [-1], [10**6]])
def test_a_bad_draft_vocabulary_is_a_load_error(checkpoint, token_ids: list[int]) -> None:
    _write_draft_vocab(checkpoint, token_ids)
    with pytest.raises(ModelLoadError, match=DRAFT_VOCAB_FILE):
        load_model(checkpoint)


def test_a_draft_vocabulary_file_without_its_tensor_is_a_load_error(checkpoint) -> None:
    from safetensors.torch import save_file

    save_file({"ids": torch.tensor([1, 2])}, str(checkpoint / DRAFT_VOCAB_FILE))
    with pytest.raises(ModelLoadError, match=DRAFT_VOCAB_FILE):
        load_model(checkpoint)
