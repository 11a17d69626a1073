"""Sampling and the speculative acceptance rule: greedy is exact, sampled output follows the
target distribution (chi-square over many seeded trials on a small vocabulary)."""

import pytest
import torch

from opencomposer.serving.engines.embedded.sampler import (
    sample,
    target_probs,
    top_logprobs,
    verify,
)
from opencomposer.serving.engines.embedded.sequence import SamplingOptions

VOCAB = 6
TRIALS = 4_000


def test_target_distribution_applies_temperature_top_k_top_p() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    plain = target_probs(logits, SamplingOptions(temperature=1.0))
    assert torch.allclose(plain, torch.softmax(logits, -1))
    top2 = target_probs(logits, SamplingOptions(temperature=1.0, top_k=2))[0]
    assert (top2[2:] == 0).all() and abs(float(top2.sum()) - 1) < 1e-6
    nucleus = target_probs(logits, SamplingOptions(temperature=1.0, top_p=0.7))[0]
    kept = (nucleus > 0).nonzero().flatten().tolist()
    assert kept == [0, 1]  # 0.61 alone is below 0.7; with 0.22 it is reached
    cold = target_probs(logits, SamplingOptions(temperature=0.1))[0]
    assert float(cold[0]) > 0.99


LOGITS = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0], [0.0, 3.0, -1.0, 1.0, 2.5, 0.2]])


def test_greedy_alternatives_are_the_softmax_best_first() -> None:
    tops = top_logprobs(LOGITS, SamplingOptions(), 3)
    expected = torch.log_softmax(LOGITS, -1)
    assert [[t for t, _ in row] for row in tops] == [[0, 1, 2], [1, 4, 3]]
    for r, row in enumerate(tops):
        assert [lp for _, lp in row] == pytest.approx([float(expected[r, t]) for t, _ in row])
    token, logprob = sample(LOGITS[1], SamplingOptions(), None)
    assert (token, logprob) == (tops[1][0][0], pytest.approx(tops[1][0][1]))


def test_alternatives_come_from_the_distribution_sampled_from() -> None:
    hot = SamplingOptions(temperature=0.5, seed=3)
    tops = top_logprobs(LOGITS, hot, 4)
    scaled = torch.log_softmax(LOGITS / 0.5, -1)
    for r, row in enumerate(tops):
        assert [lp for _, lp in row] == pytest.approx([float(scaled[r, t]) for t, _ in row])
        assert [lp for _, lp in row] == sorted((lp for _, lp in row), reverse=True)
    generator = torch.Generator().manual_seed(3)
    for _ in range(20):  # whatever is drawn, its logprob is its entry among the alternatives
        token, logprob = sample(LOGITS[0], hot, generator)
        entries = dict(top_logprobs(LOGITS[:1], hot, VOCAB)[0])
        assert entries[token] == pytest.approx(logprob)


def test_tokens_top_p_or_top_k_removed_are_impossible_alternatives() -> None:
    nucleus = top_logprobs(LOGITS[:1], SamplingOptions(temperature=1.0, top_p=0.7), 3)[0]
    kept = torch.log(target_probs(LOGITS[:1], SamplingOptions(temperature=1.0, top_p=0.7)))[0]
    assert [t for t, _ in nucleus[:2]] == [0, 1]
    assert [lp for _, lp in nucleus[:2]] == pytest.approx([float(kept[0]), float(kept[1])])
    assert nucleus[2][1] == float("-inf")
    top2 = top_logprobs(LOGITS[:1], SamplingOptions(temperature=1.0, top_k=2), 3)[0]
    assert top2[2][1] == float("-inf") and top2[0][1] > top2[1][1] > -1.5
    assert len(top_logprobs(LOGITS, SamplingOptions(), 20)[0]) == VOCAB  # capped at the vocab


def test_greedy_verification_keeps_matching_drafts_then_corrects() -> None:
    logits = torch.full((4, VOCAB), -5.0)
    for row, best in enumerate([3, 1, 4, 2]):
        logits[row, best] = 5.0
    greedy = SamplingOptions()
    assert verify(logits, [3, 1, 4], greedy, None).tokens == [3, 1, 4, 2]  # all + bonus
    verdict = verify(logits, [3, 0, 4], greedy, None)
    assert (verdict.accepted, verdict.tokens) == (1, [3, 1])  # correction at the mismatch
    assert verify(logits, [], greedy, None).tokens == [3]
    assert sample(logits[2], greedy, None)[0] == 4


def chi_square_p(observed: list[int], expected: list[float]) -> float:
    """P-value of Pearson's chi-square test (the chi-square survival function is the
    regularized upper incomplete gamma function)."""
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    freedom = len(observed) - 1
    return float(torch.special.gammaincc(torch.tensor(freedom / 2), torch.tensor(statistic / 2)))


def _histogram(tokens: list[int]) -> list[int]:
    return torch.bincount(torch.tensor(tokens), minlength=VOCAB).tolist()


def test_sampled_speculation_follows_the_target_distribution() -> None:
    """Whatever the draft, the first emitted token is distributed as the target (the
    acceptance rule is lossless), for plain, top-k and top-p processing."""
    generator = torch.Generator().manual_seed(7)
    logits = torch.tensor([[1.2, 0.3, -0.4, 0.9, -1.5, 0.0], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
    for options in (
        SamplingOptions(temperature=0.8),
        SamplingOptions(temperature=1.0, top_k=4),
        SamplingOptions(temperature=1.3, top_p=0.85),
    ):
        expected = target_probs(logits[:1], options)[0]
        for draft in (0, 4):  # a likely and an unlikely (or excluded) draft
            first = [verify(logits, [draft], options, generator).tokens[0] for _ in range(TRIALS)]
            observed = _histogram(first)
            support = [i for i in range(VOCAB) if float(expected[i]) > 0]
            assert all(observed[i] == 0 for i in range(VOCAB) if i not in support)
            p_value = chi_square_p(
                [observed[i] for i in support], [float(expected[i]) * TRIALS for i in support]
            )
            assert p_value > 1e-3, (options, draft, observed, expected)


def test_the_bonus_token_follows_the_last_distribution() -> None:
    generator = torch.Generator().manual_seed(3)
    logits = torch.tensor([[9.0, -9, -9, -9, -9, -9], [0.5, 0.1, -0.2, 0.3, 0.0, -0.6]])
    options = SamplingOptions(temperature=1.0)
    bonus = [verify(logits, [0], options, generator).tokens[1] for _ in range(TRIALS)]
    expected = target_probs(logits[1:], options)[0] * TRIALS
    p_value = chi_square_p(_histogram(bonus), expected.tolist())
    assert p_value > 1e-3


def test_the_chi_square_helper_rejects_a_wrong_distribution() -> None:
    assert chi_square_p([500, 500], [500.0, 500.0]) > 0.99
    assert chi_square_p([600, 400], [500.0, 500.0]) < 1e-6


def test_seeded_sampling_is_reproducible() -> None:
    logits = torch.randn(VOCAB)
    options = SamplingOptions(temperature=1.0)
    first = [sample(logits, options, torch.Generator().manual_seed(1))[0] for _ in range(5)]
    again = [sample(logits, options, torch.Generator().manual_seed(1))[0] for _ in range(5)]
    assert first == again
