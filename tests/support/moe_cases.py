"""Random MoE expert problems, shared by the reference's and the Triton kernels' tests."""

import torch
from torch import Tensor


def random_experts(
    tokens: int,
    d: int,
    f: int,
    experts: int,
    top_k: int,
    seed: int,
    device: torch.device | str = "cpu",
) -> tuple[Tensor, ...]:
    """(x, ids, weights, w_gate, w_up, w_down): each token routed to `top_k` distinct
    experts, weights scaled so activations stay near unit size."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, d, generator=gen)
    ids = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(tokens)])
    weights = torch.rand(tokens, top_k, generator=gen)
    w_gate = torch.randn(experts, f, d, generator=gen) / d**0.5
    w_up = torch.randn(experts, f, d, generator=gen) / d**0.5
    w_down = torch.randn(experts, d, f, generator=gen) / f**0.5
    return tuple(t.to(device) for t in (x, ids, weights, w_gate, w_up, w_down))
