"""Auxiliary-loss-free expert balancing (DeepSeek-V3 §2.1.2): a bias per expert, not a loss.

Each router adds `e_score_correction_bias` to its scores when it *chooses* experts (the
weights stay the unbiased scores, see `route_grouped_topk`). After every optimizer step each
MoE layer's bias moves by `gamma` towards balance: down for experts that got more than the
mean load in that step's batch, up for those that got less. No gradient is involved, so the
language-model loss is left alone; DeepSeek-V3 used gamma = 0.001 for most of its run.

The loads are counted from the expert ids the MoE layers record in `ctx.routed_experts` (the
same record router replay uses), all-reduced across data-parallel ranks first so that every
rank applies the same update and the replicas stay identical.
"""

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from opencomposer.serving.engines.embedded.models.deepseek_v3 import (
    DeepseekV3ForCausalLM,
    Router,
)


def routers(model: DeepseekV3ForCausalLM) -> list[Router]:
    """The MoE layers' routers in layer order (the MTP layer's last): the order in which a
    forward appends to `ctx.routed_experts`."""
    out = []
    for layer in model.model.decoder_layers():
        gate = getattr(layer.mlp, "gate", None)
        if isinstance(gate, Router):
            out.append(gate)
    return out


def expert_loads(routed: Sequence[Tensor], num_experts: int) -> Tensor:
    """[layers, experts] float32: how many (token, slot) pairs each expert got in each layer
    whose ids were recorded."""
    if not routed:
        return torch.zeros(0, num_experts)
    return torch.stack(
        [torch.bincount(ids.reshape(-1).long(), minlength=num_experts).float() for ids in routed]
    )


@torch.no_grad()
def update_biases(model: DeepseekV3ForCausalLM, loads: Tensor, gamma: float) -> None:
    """bias += gamma * sign(mean load - load), layer by layer, for the layers in `loads`
    (the first len(loads) routers: the MTP layer's only when its forward was recorded too)."""
    for router, load in zip(routers(model), loads, strict=False):
        step = gamma * torch.sign(load.mean() - load)
        router.e_score_correction_bias.add_(step.to(router.e_score_correction_bias))


def balance_stats(loads: Tensor) -> list[float]:
    """max / mean load per layer: 1.0 is perfect balance, `num_experts / top_k` total collapse."""
    return (loads.max(dim=1).values / loads.mean(dim=1).clamp_min(1e-9)).tolist()


def balance_step(
    model: DeepseekV3ForCausalLM,
    routed: Sequence[Tensor],
    *,
    gamma: float,
    enabled: bool,
    all_reduce: Callable[[Tensor], Tensor],
) -> list[float]:
    """Count this step's loads (summed over ranks), update the biases when `enabled`, and
    return max / mean per layer: what the log records either way, for the comparison."""
    loads = all_reduce(expert_loads(routed, model.config.n_routed_experts))
    if enabled:
        update_biases(model, loads, gamma)
    return balance_stats(loads)
