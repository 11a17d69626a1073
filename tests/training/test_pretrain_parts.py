"""The loop's parts on their own: schedule, expert balancing, and gradients through the MoE
reference kernels."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from opencomposer.kernels.moe import moe_experts, route_grouped_topk
from opencomposer.training.errors import TrainingError
from opencomposer.training.expert_balance import balance_stats, expert_loads
from opencomposer.training.schedule import Schedule


def test_schedule_warms_up_then_follows_a_cosine_to_the_floor() -> None:
    schedule = Schedule(peak=1.0, warmup=4, total=14, floor=0.1)
    rates = [schedule.lr(step) for step in range(14)]
    assert rates[:4] == [0.25, 0.5, 0.75, 1.0]
    assert rates[4] == 1.0 and math.isclose(rates[-1], 0.1)
    assert math.isclose(rates[9], 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 5 / 9)))
    assert all(a >= b for a, b in itertools.pairwise(rates[4:]))


@pytest.mark.parametrize(("warmup", "total"), [(5, 4), (0, 0)])
def test_bad_schedule_is_a_training_error(warmup: int, total: int) -> None:
    with pytest.raises(TrainingError):
        Schedule(peak=1.0, warmup=warmup, total=total)


def test_expert_loads_and_balance() -> None:
    routed = [torch.tensor([[0, 1], [0, 2], [0, 3]], dtype=torch.int32)]
    loads = expert_loads(routed, 4)
    assert torch.equal(loads, torch.tensor([[3.0, 1.0, 1.0, 1.0]]))
    assert balance_stats(loads) == [2.0]  # mean 1.5, max 3


def test_gradients_reach_expert_and_router_weights_like_a_dense_loop() -> None:
    gen = torch.Generator().manual_seed(0)
    tokens, hidden, inner, experts = 6, 8, 4, 4
    x = torch.randn(tokens, hidden, generator=gen)
    router = torch.randn(experts, hidden, generator=gen).requires_grad_()
    w = [torch.randn(experts, *s, generator=gen).requires_grad_() for s in
         ((inner, hidden), (inner, hidden), (hidden, inner))]  # fmt: skip

    def route() -> tuple[torch.Tensor, torch.Tensor]:
        return route_grouped_topk(
            x @ router.T, top_k=2, n_group=2, topk_group=1, correction_bias=None,
            scoring="sigmoid", norm_topk_prob=True, routed_scaling_factor=2.5,
        )  # fmt: skip

    weights, ids = route()
    moe_experts(x, ids, weights, *w).pow(2).sum().backward()
    grads = [t.grad.clone() for t in (router, *w)]  # type: ignore[union-attr]
    for t in (router, *w):
        t.grad = None
    weights, ids = route()
    dense = torch.stack(
        [
            sum(
                weights[t, j] * (F.silu(w[0][e] @ x[t]) * (w[1][e] @ x[t])) @ w[2][e].T
                for j, e in enumerate(ids[t].tolist())
            )
            for t in range(tokens)
        ]
    )
    dense.pow(2).sum().backward()
    for got, t in zip(grads, (router, *w), strict=True):
        assert got.abs().sum() > 0
        # float32, summed in another order (grouped by expert vs token by token)
        torch.testing.assert_close(got, t.grad, rtol=1e-4, atol=1e-4)
