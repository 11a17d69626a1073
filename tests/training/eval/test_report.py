"""pass@k is the unbiased estimator: the chance that k of a task's n attempts, drawn without
replacement, hold at least one pass (checked against enumerating the draws)."""

import itertools
from fractions import Fraction

import pytest

from opencomposer.training.eval.report import compare, ks_for, pass_at_k, summarize
from opencomposer.training.eval.results import TrialResult


@pytest.mark.parametrize(("n", "c"), [(1, 0), (1, 1), (5, 0), (5, 2), (6, 5), (8, 3), (10, 10)])
def test_pass_at_k_is_the_chance_a_draw_of_k_holds_a_pass(n: int, c: int):
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        draws = list(itertools.combinations(range(n), k))
        chance = Fraction(sum(any(outcomes[i] for i in draw) for draw in draws), len(draws))
        assert pass_at_k(n, c, k) == pytest.approx(float(chance), abs=1e-12)


def test_pass_at_k_needs_k_attempts():
    with pytest.raises(ValueError, match="at least 4 attempts"):
        pass_at_k(3, 1, 4)


def trial(task: str, attempt: int, passed: bool) -> TrialResult:
    return TrialResult(
        task=task,
        category="bug-fix",
        difficulty="easy",
        kind="agent",
        attempt=attempt,
        reward=float(passed),
        passed=passed,
        reward_source="reward.txt",
        prompt_tokens=100,
        completion_tokens=10,
    )


def test_ks_follow_the_fewest_attempts():
    rows = summarize(
        [trial("a", n, n == 0) for n in range(5)] + [trial("b", n, False) for n in range(6)]
    )
    assert ks_for(rows) == [1, 2, 4, 5]
    assert rows[0].pass_at(5) == 1.0 and rows[0].pass_at(1) == pytest.approx(0.2)


def test_compare_flips_on_the_majority_outcome():
    before = [trial("a", 0, False), trial("b", 0, True), trial("c", 0, True)]
    after = [trial("a", 0, True), trial("b", 0, False), trial("d", 0, True)]
    table, flips = compare(before, after)
    assert [(f.task, f.before, f.after) for f in flips] == [("a", 0.0, 1.0), ("b", 1.0, 0.0)]
    assert ("c", 1.0, None) in table and ("d", None, 1.0) in table
