"""Fixtures of the embedded engine's model tests (each prefixed with its family)."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from torch import Tensor, nn

DSV3_TINY: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "first_k_dense_replace": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_group": 4,
    "topk_group": 2,
    "n_shared_experts": 1,
    "routed_scaling_factor": 2.5,
    "q_lora_rank": 48,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "max_position_embeddings": 64,
    "num_nextn_predict_layers": 0,
}


@dataclass
class Dsv3Checkpoint:
    path: Path
    """save_pretrained folder; with MTP, its weights are in a second file, mtp.safetensors."""
    hf: Any
    """transformers' DeepseekV3ForCausalLM (float32, eager attention) with the same weights."""
    mtp: nn.ModuleDict | None
    """The MTP layer's weights as transformers modules: enorm, hnorm, eh_proj, block (a
    DeepseekV3DecoderLayer) and norm (shared_head.norm)."""


def _dsv3_randomize(module: nn.Module, gen: torch.Generator) -> None:
    """Weights of unit-scale activations (transformers' init, std 0.02, would make every
    logit and routing score nearly equal and the comparisons weak); norms around 1; a
    routing bias large enough to change some expert choices."""
    with torch.no_grad():
        for name, tensor in module.state_dict(keep_vars=True).items():  # not rotary caches
            if name.endswith("e_score_correction_bias"):
                tensor.copy_(torch.randn(tensor.shape, generator=gen) * 0.2)
            elif tensor.dim() == 1:
                tensor.copy_(1 + torch.randn(tensor.shape, generator=gen) * 0.2)
            elif tensor.dim() > 1:
                fan_in = tensor.shape[-1]
                tensor.copy_(torch.randn(tensor.shape, generator=gen) / math.sqrt(fan_in))


def _dsv3_checkpoint_names(prefix: str, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """transformers' in-memory names -> the checkpoint's: fused experts split per expert."""
    out = {}
    for name, tensor in state.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            stem = name.removesuffix("gate_up_proj")
            for e, (gate, up) in enumerate(zip(*tensor.chunk(2, dim=1), strict=True)):
                out[f"{prefix}{stem}{e}.gate_proj.weight"] = gate.clone()
                out[f"{prefix}{stem}{e}.up_proj.weight"] = up.clone()
        elif name.endswith("mlp.experts.down_proj"):
            stem = name.removesuffix("down_proj")
            for e, down in enumerate(tensor):
                out[f"{prefix}{stem}{e}.down_proj.weight"] = down.clone()
        else:
            out[prefix + name] = tensor.clone()
    return out


@pytest.fixture
def dsv3_checkpoint(tmp_path: Path) -> Callable[..., Dsv3Checkpoint]:
    """Factory: a seeded random tiny DeepSeek-V3 written by transformers' save_pretrained
    (overrides go to DeepseekV3Config); with `mtp=True` also an MTP layer at index
    num_hidden_layers, in the checkpoint layout of DeepSeek's releases."""
    transformers = pytest.importorskip("transformers")
    hf_dsv3 = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")

    def make(*, mtp: bool = False, seed: int = 0, **overrides: Any) -> Dsv3Checkpoint:
        settings = {**DSV3_TINY, **overrides, "num_nextn_predict_layers": int(mtp)}
        config = transformers.DeepseekV3Config(**settings, attn_implementation="eager")
        gen = torch.Generator().manual_seed(seed)
        hf = transformers.DeepseekV3ForCausalLM(config).eval()
        _dsv3_randomize(hf, gen)
        path = tmp_path / f"dsv3-{seed}-{len(list(tmp_path.iterdir()))}"
        hf.save_pretrained(path)
        if not mtp:
            return Dsv3Checkpoint(path, hf, None)
        d, index = config.hidden_size, config.num_hidden_layers
        layer = nn.ModuleDict(
            {
                "enorm": hf_dsv3.DeepseekV3RMSNorm(d, config.rms_norm_eps),
                "hnorm": hf_dsv3.DeepseekV3RMSNorm(d, config.rms_norm_eps),
                "eh_proj": nn.Linear(2 * d, d, bias=False),
                "block": hf_dsv3.DeepseekV3DecoderLayer(config, index),
                "norm": hf_dsv3.DeepseekV3RMSNorm(d, config.rms_norm_eps),
            }
        ).eval()
        _dsv3_randomize(layer, gen)
        prefix = f"model.layers.{index}."
        state = {f"{name}.weight": layer[name].weight for name in ("enorm", "hnorm", "eh_proj")}
        state["shared_head.norm.weight"] = layer["norm"].weight
        state |= layer["block"].state_dict()
        # DeepSeek's checkpoints repeat the shared embedding and head under the MTP layer.
        state["embed_tokens.weight"] = hf.model.embed_tokens.weight
        state["shared_head.head.weight"] = hf.lm_head.weight
        save_file(
            _dsv3_checkpoint_names(prefix, {k: v.detach() for k, v in state.items()}),
            path / "mtp.safetensors",
        )
        return Dsv3Checkpoint(path, hf, layer)

    return make
