"""The MoE reference kernels against readable per-token formulas and transformers' router.

Tolerances (CPU; "measured" is the worst case over the cases below):

| comparison                                  | atol / rtol | measured | why                    |
|---------------------------------------------|-------------|----------|------------------------|
| route_grouped_topk vs transformers' router  | exact       | exact    | same ops, same order   |
| route_grouped_topk vs per-token formula     | 1e-6 / 1e-6 | 2.4e-7   | sums in another order  |
| moe_experts vs per-token loop (float32)     | 1e-5 / 1e-5 | 9.5e-7   | GEMM blocking differs  |
| moe_experts bfloat16 vs float32 loop        | 3e-2 / 3e-2 | 1.4e-2   | bf16 inputs, 3 matmuls |
"""

import pytest
import torch
import torch.nn.functional as F
from support.moe_cases import random_experts
from torch import Tensor

from opencomposer.kernels.moe import grouped_gemm, moe_experts, permute, route_grouped_topk


def route_naive(
    logits: Tensor,
    *,
    top_k: int,
    n_group: int,
    topk_group: int,
    bias: Tensor | None,
    scoring: str,
    norm: bool,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """DeepSeek-V3's routing, one token at a time, in plain Python."""
    weights, ids = [], []
    for row in logits.float():
        scores = row.sigmoid() if scoring == "sigmoid" else row.softmax(-1)
        biased = scores if bias is None else scores + bias
        size = len(row) // n_group
        group_score = [
            sum(sorted(biased[g * size : (g + 1) * size].tolist(), reverse=True)[:2])
            for g in range(n_group)
        ]
        kept = sorted(range(n_group), key=lambda g: -group_score[g])[:topk_group]
        eligible = [e for g in kept for e in range(g * size, (g + 1) * size)]
        chosen = sorted(eligible, key=lambda e: -biased[e].item())[:top_k]
        w = scores[chosen]
        if norm:
            w = w / w.sum()
        weights.append(w * scale)
        ids.append(torch.tensor(chosen))
    return torch.stack(weights), torch.stack(ids)


def by_id(weights: Tensor, ids: Tensor) -> tuple[Tensor, Tensor]:
    """Rows as sets: columns sorted by expert id."""
    sorted_ids, order = ids.sort(dim=-1)
    return weights.gather(1, order), sorted_ids


def moe_experts_naive(
    x: Tensor, ids: Tensor, weights: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor
) -> Tensor:
    out = torch.zeros_like(x, dtype=torch.float32)
    for t in range(x.shape[0]):
        for e, w in zip(ids[t].tolist(), weights[t].float(), strict=True):
            h = F.silu(w_gate[e].float() @ x[t].float()) * (w_up[e].float() @ x[t].float())
            out[t] += w * (w_down[e].float() @ h)
    return out


ROUTING_CASES = [
    # (tokens, experts, top_k, n_group, topk_group, scoring, norm)
    pytest.param(16, 8, 2, 4, 2, "sigmoid", True, id="dsv3-like"),
    pytest.param(1, 8, 2, 4, 2, "sigmoid", True, id="one-token"),
    pytest.param(9, 12, 1, 3, 1, "sigmoid", True, id="top1-odd"),
    pytest.param(7, 16, 4, 1, 1, "sigmoid", True, id="kimi-like-n_group1"),
    pytest.param(5, 8, 3, 8, 3, "sigmoid", False, id="groups-of-one-unnormed"),
    pytest.param(11, 8, 2, 2, 1, "softmax", True, id="softmax"),
]


@pytest.mark.parametrize(
    ("tokens", "experts", "top_k", "n_group", "topk_group", "scoring", "norm"), ROUTING_CASES
)
@pytest.mark.parametrize("with_bias", [True, False])
def test_routing_matches_per_token_formula(
    tokens: int,
    experts: int,
    top_k: int,
    n_group: int,
    topk_group: int,
    scoring: str,
    norm: bool,
    with_bias: bool,
) -> None:
    gen = torch.Generator().manual_seed(tokens * experts + top_k)
    logits = torch.randn(tokens, experts, generator=gen)
    bias = torch.randn(experts, generator=gen) * 0.5 if with_bias else None
    weights, ids = route_grouped_topk(
        logits,
        top_k=top_k,
        n_group=n_group,
        topk_group=topk_group,
        correction_bias=bias,
        scoring=scoring,
        norm_topk_prob=norm,
        routed_scaling_factor=2.5,
    )
    assert weights.dtype == torch.float32 and ids.dtype == torch.int64
    assert weights.shape == ids.shape == (tokens, top_k)
    expected = route_naive(
        logits,
        top_k=top_k,
        n_group=n_group,
        topk_group=topk_group,
        bias=bias,
        scoring=scoring,
        norm=norm,
        scale=2.5,
    )
    got_w, got_ids = by_id(weights, ids)
    want_w, want_ids = by_id(*expected)
    assert torch.equal(got_ids, want_ids)
    torch.testing.assert_close(got_w, want_w, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    ("experts", "top_k", "n_group", "topk_group"), [(8, 2, 4, 2), (16, 4, 1, 1), (32, 8, 8, 4)]
)
def test_routing_matches_transformers_router(
    experts: int, top_k: int, n_group: int, topk_group: int
) -> None:
    transformers = pytest.importorskip("transformers")
    hf_dsv3 = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")

    config = transformers.DeepseekV3Config(
        hidden_size=24,
        n_routed_experts=experts,
        num_experts_per_tok=top_k,
        n_group=n_group,
        topk_group=topk_group,
        routed_scaling_factor=2.827,
    )
    router = hf_dsv3.DeepseekV3TopkRouter(config)
    gen = torch.Generator().manual_seed(experts)
    with torch.no_grad():
        router.weight.copy_(torch.randn(experts, 24, generator=gen))
        router.e_score_correction_bias.copy_(torch.randn(experts, generator=gen) * 0.3)
    hidden = torch.randn(37, 24, generator=gen)
    logits, want_w, want_ids = router(hidden)
    weights, ids = route_grouped_topk(
        logits,
        top_k=top_k,
        n_group=n_group,
        topk_group=topk_group,
        correction_bias=router.e_score_correction_bias,
        scoring="sigmoid",
        norm_topk_prob=True,
        routed_scaling_factor=2.827,
    )
    assert torch.equal(ids, want_ids)
    assert torch.equal(weights, want_w)


def test_routing_rejects_uneven_groups() -> None:
    with pytest.raises(ValueError, match="groups"):
        route_grouped_topk(
            torch.zeros(2, 10),
            top_k=2,
            n_group=4,
            topk_group=2,
            correction_bias=None,
            scoring="sigmoid",
            norm_topk_prob=True,
            routed_scaling_factor=1.0,
        )


def test_permute_groups_slots_by_expert() -> None:
    ids = torch.tensor([[3, 0], [0, 2], [3, 3]])
    order, counts = permute(ids, num_experts=5)
    assert counts.tolist() == [2, 0, 1, 3, 0]
    assert order.tolist() == [1, 2, 3, 0, 4, 5]


def test_grouped_gemm_runs_each_expert_on_its_rows() -> None:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 5, 4, generator=gen)
    x = torch.randn(6, 4, generator=gen)
    counts = torch.tensor([2, 0, 4])
    expected = torch.cat([x[:2] @ w[0].T, x[2:] @ w[2].T])
    torch.testing.assert_close(grouped_gemm(x, w, counts), expected)


@pytest.mark.parametrize(
    ("tokens", "d", "f", "experts", "top_k"),
    [
        pytest.param(16, 64, 32, 8, 2, id="typical"),
        pytest.param(1, 64, 32, 8, 2, id="one-token"),
        pytest.param(13, 24, 40, 5, 1, id="top1-odd-shapes"),
        pytest.param(3, 17, 9, 32, 4, id="mostly-empty-experts"),
        pytest.param(7, 8, 8, 8, 8, id="every-expert"),
    ],
)
def test_moe_experts_matches_per_token_loop(
    tokens: int, d: int, f: int, experts: int, top_k: int
) -> None:
    args = random_experts(tokens, d, f, experts, top_k, seed=tokens + d)
    torch.testing.assert_close(moe_experts(*args), moe_experts_naive(*args), atol=1e-5, rtol=1e-5)


def test_moe_experts_all_tokens_to_one_expert() -> None:
    x, _, _, w_gate, w_up, w_down = random_experts(9, 32, 16, 6, 1, seed=5)
    ids = torch.full((9, 1), 4)
    weights = torch.ones(9, 1)
    expected = F.linear(F.silu(F.linear(x, w_gate[4])) * F.linear(x, w_up[4]), w_down[4])
    torch.testing.assert_close(moe_experts(x, ids, weights, w_gate, w_up, w_down), expected)


def test_moe_experts_bfloat16_keeps_dtype_and_accuracy() -> None:
    args = random_experts(10, 64, 32, 8, 2, seed=3)
    x, ids, weights, *w = args
    out = moe_experts(x.bfloat16(), ids, weights, *(t.bfloat16() for t in w))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), moe_experts_naive(*args), atol=3e-2, rtol=3e-2)


ROUTE = {
    "top_k": 2,
    "n_group": 4,
    "topk_group": 2,
    "scoring": "sigmoid",
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
}


def test_replaying_the_chosen_ids_gives_identical_weights() -> None:
    gen = torch.Generator().manual_seed(11)
    logits, bias = torch.randn(13, 8, generator=gen), torch.randn(8, generator=gen) * 0.5
    weights, ids = route_grouped_topk(logits, correction_bias=bias, **ROUTE)
    replayed, same = route_grouped_topk(logits, correction_bias=bias, expert_ids=ids, **ROUTE)
    assert torch.equal(same, ids)
    assert torch.equal(replayed, weights)


def test_replayed_ids_are_weighted_from_the_live_unbiased_scores() -> None:
    gen = torch.Generator().manual_seed(12)
    logits, bias = torch.randn(5, 8, generator=gen), torch.randn(8, generator=gen) * 0.5
    forced = torch.tensor([[7, 0], [1, 2], [3, 3], [6, 5], [4, 7]])
    weights, ids = route_grouped_topk(logits, correction_bias=bias, expert_ids=forced, **ROUTE)
    scores = logits.sigmoid().gather(1, forced)
    assert torch.equal(ids, forced)
    torch.testing.assert_close(weights, 2.5 * scores / scores.sum(-1, keepdim=True))


def test_replay_rejects_ids_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match="replayed ids"):
        route_grouped_topk(
            torch.zeros(3, 8), correction_bias=None, expert_ids=torch.zeros(3, 1), **ROUTE
        )


@pytest.mark.parametrize("replay", [False, True])
def test_gradients_reach_the_router_logits(replay: bool) -> None:
    """Autograd against central finite differences of a weighted sum of the weights."""
    gen = torch.Generator().manual_seed(13)
    logits = torch.randn(4, 8, generator=gen, dtype=torch.float64)
    bias = torch.randn(8, generator=gen) * 0.5
    ids = route_grouped_topk(logits, correction_bias=bias, **ROUTE)[1]
    replayed = (ids + 3) % 8 if replay else None
    probe = torch.randn(4, 2, generator=gen)

    def loss(x: Tensor) -> Tensor:
        w = route_grouped_topk(x, correction_bias=bias, expert_ids=replayed, **ROUTE)[0]
        return (w * probe).sum()

    x = logits.clone().requires_grad_()
    (grad,) = torch.autograd.grad(loss(x), x)
    assert grad.abs().sum() > 0
    numeric = torch.zeros_like(logits)
    eps = 1e-3
    for i in range(4):
        for e in range(8):
            step = torch.zeros_like(logits)
            step[i, e] = eps
            numeric[i, e] = (loss(logits + step) - loss(logits - step)) / (2 * eps)
    torch.testing.assert_close(grad, numeric, atol=1e-3, rtol=1e-3)
