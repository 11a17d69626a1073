"""Layers the model families share: RMSNorm, rotary position embedding, the SwiGLU MLP.

Each one computes exactly what its Hugging Face counterpart does, in the same order of
operations and the same dtypes, so a family built from them matches transformers' logits to
float32 rounding: RMSNorm normalizes in float32 and scales in the input dtype; rotary angles are
computed in float32 from a float32 `inv_freq` and rounded to the activations' dtype only as
cos/sin, the way transformers does it.

Rotary here is the non-interleaved ("rotate_half") layout of Llama checkpoints: the two
halves of a head, not its even/odd pairs, are rotated together.
"""

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        # float32 statistics even for bf16 activations: the mean of squares underflows otherwise.
        normed = x.float()
        normed = normed * torch.rsqrt(normed.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rope_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The rotary settings of a config.json in one shape, whichever layout it uses:
    transformers 5 writes `rope_parameters` (theta inside), checkpoints saved before it
    `rope_theta` beside `rope_scaling` (whose type key may be the older `type`). Returns the
    scaling keys plus `rope_type` and `rope_theta`; llama3 scaling falls back to
    max_position_embeddings for its original context length, as transformers does."""
    params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    params["rope_type"] = params.get("rope_type", params.pop("type", "default"))
    params.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    if params["rope_type"] == "llama3":
        params.setdefault("original_max_position_embeddings", config.get("max_position_embeddings"))
    return params


def _scale_linear(inv_freq: Tensor, params: dict[str, Any]) -> Tensor:
    return inv_freq / params["factor"]


def _scale_llama3(inv_freq: Tensor, params: dict[str, Any]) -> Tensor:
    """Llama 3.1: long wavelengths slowed down by `factor`, short ones kept, a smooth blend
    between (transformers' `_compute_llama3_parameters`, operation for operation)."""
    factor = params["factor"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    old_context = params["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


ROPE_SCALINGS: dict[str, Callable[[Tensor, dict[str, Any]], Tensor]] = {
    "default": lambda inv_freq, _: inv_freq,
    "linear": _scale_linear,
    "llama3": _scale_llama3,
}


def rope_inv_freq(head_dim: int, params: dict[str, Any]) -> Tensor:
    """[head_dim / 2] float32 inverse frequencies for `rope_parameters(config)`."""
    rope_type = params["rope_type"]
    if rope_type not in ROPE_SCALINGS:
        raise ValueError(
            f"unsupported rope_type {rope_type!r} (supported: {', '.join(ROPE_SCALINGS)})"
        )
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (params["rope_theta"] ** exponents)
    return ROPE_SCALINGS[rope_type](inv_freq, params)


class RotaryEmbedding(nn.Module):
    """cos and sin of each position's angles, [T, head_dim] each, in the activations' dtype.

    `inv_freq` is a buffer so it follows the model's device, but it stays float32 when the
    model is cast: rounded to bf16 it would shift every angle by up to 0.4% (1.8 radians
    at position 4096 for a 32-pair head)."""

    inv_freq: Tensor

    def __init__(self, inv_freq: Tensor) -> None:
        super().__init__()
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> "RotaryEmbedding":
        inv_freq = self.inv_freq
        super()._apply(fn, recurse)
        self.inv_freq = inv_freq.to(self.inv_freq.device)
        return self

    def forward(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        freqs = positions[:, None].float() * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate [T, heads, head_dim] queries or keys by their positions' [T, head_dim] cos/sin."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (x * cos) + (rotate_half(x) * sin)
