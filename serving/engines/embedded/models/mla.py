"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2) over the paged cache.

Keys and values are never cached per head: each token stores one compressed entry, the
normalized latent (kv_lora_rank values) followed by its rotated rope key (qk_rope_head_dim
values, shared by all heads) — 576 values a token for DeepSeek-V3, against 2 x 128 heads x
128 for plain multi-head attention. Attention then takes one of two equal forms:

* naive: decompress the context's latents with kv_b_proj into per-head k_nope and v, then
  ordinary attention (what transformers does; cheapest for long prefills);
* absorbed: fold kv_b_proj's key half into the query and its value half after attention,
  so every head scores directly against the cached entries (cheapest for decode and verify,
  where a few queries meet a long context).

`MultiHeadLatentAttention.path` chooses; "auto" counts the multiply-adds of both per sequence.

RoPE follows transformers' DeepSeek code: YaRN frequencies with an `attention_factor` on
cos/sin, a softmax scale multiplied by mscale(factor, mscale_all_dim)², and with
`rope_interleave` the checkpoint's (even, odd) pairs rotated together, the result laid out
de-interleaved (evens, then odds). That permutes the rope dimensions of queries and cached
keys alike, so dot products are unchanged.
"""

import math
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opencomposer.serving.engines.embedded.attention import (
    ForwardContext,
    write_cache,
)
from opencomposer.serving.engines.embedded.models.layers import (
    RMSNorm,
    apply_rotary,
    rope_inv_freq,
)


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_inv_freq(dim: int, params: dict[str, Any]) -> Tensor:
    """YaRN frequencies (transformers' `_compute_yarn_parameters`, operation for operation):
    high frequencies kept, low ones divided by `factor`, a linear ramp between the dimensions
    that make beta_fast and beta_slow rotations over the original context."""
    base, factor = params["rope_theta"], params["factor"]
    old_context = params["original_max_position_embeddings"]

    def correction_dim(rotations: float) -> float:
        return dim * math.log(old_context / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = correction_dim(params.get("beta_fast") or 32)
    high = correction_dim(params.get("beta_slow") or 1)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    original_share = 1 - ramp
    return (1.0 / (factor * pos_freqs)) * (1 - original_share) + (1.0 / pos_freqs) * original_share


def rope_setup(dim: int, params: dict[str, Any], qk_head_dim: int) -> tuple[Tensor, float, float]:
    """(inv_freq, attention_factor applied to cos/sin, softmax scale) for the rope part."""
    scale = qk_head_dim**-0.5
    if params["rope_type"] == "default":
        return rope_inv_freq(dim, params), 1.0, scale
    if params.get("mscale_all_dim"):
        m = yarn_mscale(params["factor"], params["mscale_all_dim"])
        scale = scale * m * m
    if params["rope_type"] != "yarn":
        return rope_inv_freq(dim, params), 1.0, scale
    factor = params["factor"]
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = yarn_mscale(factor)
    return yarn_inv_freq(dim, params), float(attention_factor), scale


def apply_rotary_interleaved(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate [T, heads, dim] by [T, dim] cos/sin (cat(freqs, freqs)) in (even, odd) pairs;
    the output holds the rotated evens, then the rotated odds."""
    half = cos.shape[-1] // 2
    cos, sin = cos[:, None, :half], sin[:, None, :half]
    evens, odds = x[..., 0::2], x[..., 1::2]
    return torch.cat([evens * cos - odds * sin, odds * cos + evens * sin], dim=-1)


class MultiHeadLatentAttention(nn.Module):
    path: Literal["auto", "naive", "absorbed"] = "auto"
    """Which form computes attention; "auto" picks the cheaper one for each sequence."""

    cache: Tensor
    """[num_slots, kv_lora_rank + qk_rope_head_dim]: normalized latent, then rotated k_pe."""

    def __init__(
        self,
        *,
        hidden_size: int,
        num_heads: int,
        q_lora_rank: int | None,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        softmax_scale: float,
        rope_interleave: bool,
    ) -> None:
        super().__init__()
        self.num_heads, self.q_lora_rank, self.kv_lora_rank = num_heads, q_lora_rank, kv_lora_rank
        self.nope_dim, self.rope_dim, self.v_dim = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.softmax_scale = softmax_scale
        self.rotate = apply_rotary_interleaved if rope_interleave else apply_rotary
        q_dim = num_heads * (qk_nope_head_dim + qk_rope_head_dim)
        if q_lora_rank is None:
            self.q_proj = nn.Linear(hidden_size, q_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(hidden_size, q_lora_rank, bias=False)
            # transformers and DeepSeek's own code give the two inner norms eps 1e-6 whatever
            # the config's rms_norm_eps says.
            self.q_a_layernorm = RMSNorm(q_lora_rank)
            self.q_b_proj = nn.Linear(q_lora_rank, q_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(
            hidden_size, kv_lora_rank + qk_rope_head_dim, bias=False
        )
        self.kv_a_layernorm = RMSNorm(kv_lora_rank)
        self.kv_b_proj = nn.Linear(
            kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False
        )
        self.o_proj = nn.Linear(num_heads * v_head_dim, hidden_size, bias=False)
        self.register_buffer(
            "cache", torch.empty(0, kv_lora_rank + qk_rope_head_dim), persistent=False
        )

    def forward(self, x: Tensor, ctx: ForwardContext, cos: Tensor, sin: Tensor) -> Tensor:
        """[T, hidden] normed states -> [T, hidden]; writes the new tokens' cache entries."""
        tokens = x.shape[0]
        if self.q_lora_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q_nope, q_pe = q.view(tokens, self.num_heads, -1).split(
            [self.nope_dim, self.rope_dim], dim=-1
        )
        latent, k_pe = self.kv_a_proj_with_mqa(x).split([self.kv_lora_rank, self.rope_dim], dim=-1)
        q_pe = self.rotate(q_pe, cos, sin)
        k_pe = self.rotate(k_pe.unsqueeze(1), cos, sin).squeeze(1)
        write_cache(self.cache, ctx, torch.cat([self.kv_a_layernorm(latent), k_pe], dim=-1))

        out = x.new_empty(tokens, self.num_heads, self.v_dim)
        for index, ((start, new, total), slots) in enumerate(
            zip(ctx.runs(), ctx.gather_indices, strict=True)
        ):
            entries = self.cache.index_select(0, slots).to(x.dtype)
            attend = self._absorbed if self._absorb(new, total) else self._naive
            run = slice(start, start + new)
            out[run] = attend(q_nope[run], q_pe[run], entries, ctx.mask(index))
        return self.o_proj(out.flatten(1))

    def _absorb(self, new: int, total: int) -> bool:
        if self.path != "auto":
            return self.path == "absorbed"
        c, n, r, v = self.kv_lora_rank, self.nope_dim, self.rope_dim, self.v_dim
        # Multiply-adds per head: decompressing `total` latents, then attention with small
        # heads; or absorbing `new` queries and outputs, then attention over the latent.
        naive = total * c * (n + v) + new * total * (n + r + v)
        absorbed = new * c * (n + v) + new * total * (2 * c + r)
        return absorbed < naive

    def _naive(self, q_nope: Tensor, q_pe: Tensor, entries: Tensor, mask: Tensor) -> Tensor:
        latent, k_pe = entries.split([self.kv_lora_rank, self.rope_dim], dim=-1)
        k_nope, values = (
            self.kv_b_proj(latent)
            .view(len(entries), self.num_heads, -1)
            .split([self.nope_dim, self.v_dim], dim=-1)
        )
        keys = torch.cat([k_nope, k_pe.unsqueeze(1).expand(-1, self.num_heads, -1)], dim=-1)
        queries = torch.cat([q_nope, q_pe], dim=-1)
        out = F.scaled_dot_product_attention(
            queries.transpose(0, 1),
            keys.transpose(0, 1),
            values.transpose(0, 1),
            attn_mask=mask,
            scale=self.softmax_scale,
        )
        return out.transpose(0, 1)

    def _absorbed(self, q_nope: Tensor, q_pe: Tensor, entries: Tensor, mask: Tensor) -> Tensor:
        w_uk, w_uv = self.kv_b_proj.weight.view(self.num_heads, -1, self.kv_lora_rank).split(
            [self.nope_dim, self.v_dim], dim=1
        )
        # q_nope · (W_UK latent) = (q_nope W_UK) · latent: one MQA head of width c + r whose
        # keys are the cache entries themselves and whose values are the latents.
        queries = torch.cat(
            [torch.einsum("thn,hnc->htc", q_nope, w_uk), q_pe.transpose(0, 1)], dim=-1
        )
        keys = entries.unsqueeze(0).expand(self.num_heads, -1, -1)
        values = keys[..., : self.kv_lora_rank]
        out_latent = F.scaled_dot_product_attention(
            queries, keys, values, attn_mask=mask, scale=self.softmax_scale
        )
        return torch.einsum("htc,hvc->thv", out_latent, w_uv)
