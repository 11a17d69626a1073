"""Mixture-of-experts reference kernels: DeepSeek-V3 routing and SwiGLU experts.

`route_grouped_topk` is DeepSeek-V3's `noaux_tc` router (also Kimi K2's): the bias-corrected
scores pick the experts, the uncorrected scores weight them. It runs the same tensor ops in the
same order as transformers' `DeepseekV3TopkRouter`, so on the same device the two agree bit for
bit; the order of the k columns is whatever `topk(sorted=False)` gives, and callers treat each
row as a set.

`moe_experts` is the layout every fast MoE kernel uses, in plain PyTorch: sort the (token,
slot) pairs by expert (`permute`), run one GEMM per expert over its contiguous run
(`grouped_gemm`), then scatter the results back to their slots and take the weighted sum.
Summing over each token's k slots (instead of `index_add` by token) keeps the result
deterministic on every device.

Every step takes `impl` ("reference" | "triton", None: the process-wide choice, see
`implementation.py`); the Triton copies live in `triton_moe.py`, imported only when chosen.
"""

from types import ModuleType
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from opencomposer.kernels.implementation import Implementation, resolve


def route_grouped_topk(
    router_logits: Tensor,
    *,
    top_k: int,
    n_group: int,
    topk_group: int,
    correction_bias: Tensor | None,
    scoring: Literal["sigmoid", "softmax"],
    norm_topk_prob: bool,
    routed_scaling_factor: float,
    expert_ids: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """[T, E] router logits -> ([T, top_k] float32 weights, [T, top_k] int64 expert ids).

    Experts are split into `n_group` equal groups; each group is scored by the sum of its two
    best bias-corrected scores, only the `topk_group` best groups stay eligible, and the
    `top_k` best eligible experts are chosen. Their weights are the scores *without* the
    bias (the bias only balances load), renormalized to sum to one when `norm_topk_prob`,
    then multiplied by `routed_scaling_factor`.

    Router replay (RL): given `expert_ids` ([T, top_k], the experts the sampler chose), the
    choice is skipped and those experts are weighted from the live scores exactly as chosen
    ones would be, so the trainer's forward runs the sampler's experts while gradients still
    reach `router_logits` through the weights. Autograd flows in both modes.
    """
    num_tokens, num_experts = router_logits.shape
    if num_experts % n_group or not 1 <= topk_group <= n_group:
        raise ValueError(
            f"{num_experts} experts cannot form {n_group} groups, keeping {topk_group}"
        )
    logits = router_logits.float()
    if scoring == "sigmoid":
        scores = logits.sigmoid()
    elif scoring == "softmax":
        scores = logits.softmax(dim=-1)
    else:
        raise ValueError(f"unknown scoring function {scoring!r}")
    if expert_ids is None:
        ids = _choose(scores, correction_bias, top_k, n_group, topk_group)
    elif expert_ids.shape != (num_tokens, top_k):
        raise ValueError(f"replayed ids {tuple(expert_ids.shape)}, expected {(num_tokens, top_k)}")
    else:
        ids = expert_ids.to(device=scores.device, dtype=torch.int64)

    weights = scores.gather(1, ids)
    if norm_topk_prob:
        # The epsilon is DeepSeek's; it only matters when every chosen score underflows to 0.
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * routed_scaling_factor, ids


def _choose(
    scores: Tensor, correction_bias: Tensor | None, top_k: int, n_group: int, topk_group: int
) -> Tensor:
    """The group-limited top-k over the bias-corrected scores ([T, E] -> [T, top_k])."""
    num_tokens, num_experts = scores.shape
    for_choice = scores if correction_bias is None else scores + correction_bias.float()
    group_size = num_experts // n_group
    group_scores = (
        for_choice.view(num_tokens, n_group, group_size)
        .topk(min(2, group_size), dim=-1)[0]
        .sum(dim=-1)
    )
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    expert_mask = group_mask.unsqueeze(-1).expand(-1, -1, group_size).reshape(num_tokens, -1)
    for_choice = for_choice.masked_fill(~expert_mask.bool(), float("-inf"))
    return torch.topk(for_choice, k=top_k, dim=-1, sorted=False)[1]


def permute(
    ids: Tensor, num_experts: int, *, impl: Implementation | None = None
) -> tuple[Tensor, Tensor]:
    """[T, k] expert ids -> (order, counts): `order` ([T * k]) lists the flattened
    (token, slot) indices grouped by expert, in token order within an expert (stable sort);
    `counts` ([num_experts]) is the length of each expert's run, zero for unused experts."""
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    if resolve(impl, ids.device) == "triton":
        return order, _triton().expert_counts(ids, num_experts)
    return order, torch.bincount(flat, minlength=num_experts)


def expert_offsets(counts: Tensor, *, impl: Implementation | None = None) -> Tensor:
    """Where each expert's run starts in the sorted rows: the exclusive cumsum of `counts`."""
    if resolve(impl, counts.device) == "triton":
        return _triton().expert_offsets(counts)
    return torch.cumsum(counts, 0) - counts


def permute_tokens(
    x: Tensor, order: Tensor, top_k: int, *, impl: Implementation | None = None
) -> Tensor:
    """x's rows ([T, d]) in expert order: row i is the token of flattened slot `order[i]`."""
    if resolve(impl, x.device) == "triton":
        return _triton().permute_tokens(x, order, top_k)
    return x[order // top_k]


def unpermute(
    y_sorted: Tensor, order: Tensor, weights: Tensor, *, impl: Implementation | None = None
) -> Tensor:
    """Expert-ordered rows back to their (token, slot) places, summed over each token's k
    slots with `weights` ([T, k]) in float32 and cast back to y's dtype."""
    if resolve(impl, y_sorted.device) == "triton":
        return _triton().unpermute(y_sorted, order, weights)
    num_tokens, top_k = weights.shape
    y = torch.empty_like(y_sorted)
    y[order] = y_sorted
    y = y.view(num_tokens, top_k, -1).float() * weights.unsqueeze(-1).float()
    return y.sum(dim=1).to(y_sorted.dtype)


def grouped_gemm(
    x_sorted: Tensor, w: Tensor, counts: Tensor, *, impl: Implementation | None = None
) -> Tensor:
    """Rows grouped by expert ([N, in], runs of `counts`) times each run's expert weight
    ([E, out, in], nn.Linear layout) -> [N, out]."""
    if resolve(impl, x_sorted.device) == "triton":
        return _triton().grouped_gemm(x_sorted, w, counts)
    out = x_sorted.new_empty(x_sorted.shape[0], w.shape[1])
    start = 0
    for expert, count in enumerate(counts.tolist()):
        if count:
            out[start : start + count] = x_sorted[start : start + count] @ w[expert].T
        start += count
    return out


def moe_experts(
    x: Tensor,
    ids: Tensor,
    weights: Tensor,
    w_gate: Tensor,
    w_up: Tensor,
    w_down: Tensor,
    *,
    impl: Implementation | None = None,
) -> Tensor:
    """Σ_j weights[t, j] · down(silu(gate(x[t])) * up(x[t])) over the experts ids[t, j].

    x: [T, d]; ids, weights: [T, k]; w_gate, w_up: [E, f, d]; w_down: [E, d, f]. The
    weighted sum is taken in float32 and cast back to x's dtype."""
    impl = resolve(impl, x.device)
    order, counts = permute(ids, w_gate.shape[0], impl=impl)
    x_sorted = permute_tokens(x, order, ids.shape[1], impl=impl)
    gate = grouped_gemm(x_sorted, w_gate, counts, impl=impl)
    hidden = F.silu(gate) * grouped_gemm(x_sorted, w_up, counts, impl=impl)
    return unpermute(grouped_gemm(hidden, w_down, counts, impl=impl), order, weights, impl=impl)


def _triton() -> ModuleType:
    """The Triton kernels, imported on first use so that this package imports without triton."""
    from opencomposer.kernels import triton_moe

    return triton_moe
