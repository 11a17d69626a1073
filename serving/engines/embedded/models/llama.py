"""The Llama family (SmolLM2 is one): pre-norm decoder layers of GQA attention with rotary
positions and a SwiGLU MLP.

The module tree mirrors transformers' `LlamaForCausalLM` (`model.layers.N.self_attn.q_proj`,
...), so every parameter's name is its checkpoint name and `load_weights` is a lookup. Each
attention layer keeps its cache as K and V tensors of [num_slots, kv_heads, head_dim], written
at the context's slots and read back by `paged_attention`.

With `num_nextn_predict_layers = 1` (SmolLM2 ships none; `opencomposer train mtp` trains one)
the model also builds an MTP block in DeepSeek-V3's layout at `model.layers.{num_hidden_layers}`:
`enorm` on the next token's embedding and `hnorm` on the main model's final normed hidden
state, concatenated in that order and projected by `eh_proj` [hidden, 2 * hidden], one Llama
decoder layer with its own cache at the main model's slots, and `shared_head.norm`. The
embedding and LM head are the main model's, so checkpoint copies of them under the MTP layer
are skipped, as are all MTP weights when the model is built without MTP.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from opencomposer.serving.engines.embedded.attention import (
    ForwardContext,
    paged_attention,
    write_cache,
)
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.models.layers import (
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    apply_rotary,
    rope_inv_freq,
    rope_parameters,
)


@dataclass(frozen=True)
class LlamaConfig:
    """The config.json fields the model reads; the defaults are transformers' own."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    attention_bias: bool
    tie_word_embeddings: bool
    rope: dict[str, Any]
    """`layers.rope_parameters` of the config: rope_type, rope_theta and the scaling keys."""

    num_nextn_predict_layers: int = 0
    """MTP layers (at most one is built); absent from Llama configs, which then have none."""

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> "LlamaConfig":
        if config.get("hidden_act", "silu") != "silu" or config.get("mlp_bias", False):
            raise ValueError("only the silu MLP without biases is supported")
        heads = config["num_attention_heads"]
        return cls(
            vocab_size=config["vocab_size"],
            hidden_size=config["hidden_size"],
            intermediate_size=config["intermediate_size"],
            num_hidden_layers=config["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=config.get("num_key_value_heads") or heads,
            head_dim=config.get("head_dim") or config["hidden_size"] // heads,
            rms_norm_eps=config.get("rms_norm_eps", 1e-6),
            max_position_embeddings=config.get("max_position_embeddings", 2048),
            attention_bias=config.get("attention_bias", False),
            tie_word_embeddings=config.get("tie_word_embeddings", False),
            rope=rope_parameters(config),
            num_nextn_predict_layers=config.get("num_nextn_predict_layers", 0),
        )


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.head_dim = config.head_dim
        self.num_kv_heads = config.num_key_value_heads
        self.scale = config.head_dim**-0.5
        q_size = config.num_attention_heads * config.head_dim
        kv_size = config.num_key_value_heads * config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, q_size, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, kv_size, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, kv_size, bias=bias)
        self.o_proj = nn.Linear(q_size, config.hidden_size, bias=bias)
        # Plain attributes, not buffers: caches are sized by the engine, never saved.
        self.k_cache = torch.empty(0)
        self.v_cache = torch.empty(0)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, ctx: ForwardContext) -> Tensor:
        tokens = x.shape[0]
        q = apply_rotary(self.q_proj(x).view(tokens, -1, self.head_dim), cos, sin)
        k = apply_rotary(self.k_proj(x).view(tokens, -1, self.head_dim), cos, sin)
        write_cache(self.k_cache, ctx, k)
        write_cache(self.v_cache, ctx, self.v_proj(x).view(tokens, -1, self.head_dim))
        attended = paged_attention(q, self.k_cache, self.v_cache, ctx, self.scale)
        return self.o_proj(attended.reshape(tokens, -1))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SwiGLU(config.hidden_size, config.intermediate_size)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, ctx: ForwardContext) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, ctx)
        return x + self.mlp(self.post_attention_layernorm(x))


class SharedHead(nn.Module):
    """The MTP layer's final norm; its `head` is the main LM head, not stored here."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LlamaMTPLayer(LlamaDecoderLayer):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.enorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.hnorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)
        self.shared_head = SharedHead(config)

    def predict(
        self, embeds: Tensor, hidden: Tensor, cos: Tensor, sin: Tensor, ctx: ForwardContext
    ) -> Tensor:
        x = self.eh_proj(torch.cat([self.enorm(embeds), self.hnorm(hidden)], dim=-1))
        return self.shared_head.norm(self(x, cos, sin, ctx))


class LlamaModel(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.num_hidden_layers = config.num_hidden_layers
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        layers = [LlamaDecoderLayer(config) for _ in range(config.num_hidden_layers)]
        if config.num_nextn_predict_layers:
            layers.append(LlamaMTPLayer(config))
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(rope_inv_freq(config.head_dim, config.rope))

    def decoder_layers(self) -> list[LlamaDecoderLayer]:
        """The layers, the MTP layer's included, as what they are: `nn.ModuleList` hands them
        out as plain modules."""
        return [layer for layer in self.layers if isinstance(layer, LlamaDecoderLayer)]

    def forward(self, input_ids: Tensor, ctx: ForwardContext) -> Tensor:
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(ctx.positions, x.dtype)
        for layer in self.layers[: self.num_hidden_layers]:
            x = layer(x, cos, sin, ctx)
        return self.norm(x)

    def mtp_forward(self, input_ids: Tensor, hidden: Tensor, ctx: ForwardContext) -> Tensor:
        mtp = self.layers[self.num_hidden_layers]
        assert isinstance(mtp, LlamaMTPLayer)  # the caller checked num_mtp_layers
        embeds = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(ctx.positions, embeds.dtype)
        return mtp.predict(embeds, hidden, cos, sin, ctx)


class LlamaForCausalLM(CausalLM):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.hidden_size = config.hidden_size
        self.max_positions = config.max_position_embeddings
        self.num_mtp_layers = min(config.num_nextn_predict_layers, 1)
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            # One parameter under two names; named_parameters() lists it once, as the embedding.
            self.lm_head.weight = self.model.embed_tokens.weight

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "LlamaForCausalLM":
        return cls(LlamaConfig.from_dict(config))

    def _skipped(self, name: str) -> bool:
        """Rotary caches, the tied head's copy, copies of the shared embedding and head under
        the MTP layer, and MTP layers not built."""
        if name.endswith("rotary_emb.inv_freq") or (
            name == "lm_head.weight" and self.config.tie_word_embeddings
        ):
            return True
        match = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name)
        if match is None or int(match[1]) < self.config.num_hidden_layers:
            return False
        return int(match[1]) - self.config.num_hidden_layers >= self.num_mtp_layers or match[2] in (
            "shared_head.head.weight",
            "embed_tokens.weight",
        )

    def checkpoint_targets(self, name: str, tensor: Tensor) -> list[tuple[Tensor, Tensor]]:
        if self._skipped(name):
            return []
        own = self.own_tensors()
        if name not in own:
            raise KeyError(f"unknown weight {name!r} for {type(self).__name__}")
        return [(own[name], tensor)]

    def load_weights(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        """Checkpoint names are parameter names. Skipped: rotary `inv_freq` caches that old
        checkpoints saved, `lm_head.weight` when tied (some checkpoints store the copy), and
        what `_skipped` says of MTP weights."""
        params = dict(self.named_parameters())
        missing = set(params)
        for name, tensor in weights:
            if self._skipped(name):
                continue
            if name not in params:
                raise ValueError(f"unknown weight {name!r} for {type(self).__name__}")
            param = params[name]
            if param.shape != tensor.shape:
                raise ValueError(
                    f"weight {name!r} has shape {tuple(tensor.shape)}, the model "
                    f"expects {tuple(param.shape)}"
                )
            with torch.no_grad():
                param.copy_(tensor)
            missing.discard(name)
        if missing:
            raise ValueError(f"missing weights: {', '.join(sorted(missing))}")

    def allocate_kv_cache(self, num_slots: int, dtype: torch.dtype | None = None) -> None:
        weight = self.model.embed_tokens.weight
        for layer in self.model.decoder_layers():
            attn = layer.self_attn
            shape = (num_slots, attn.num_kv_heads, attn.head_dim)
            attn.k_cache = torch.zeros(shape, dtype=dtype or weight.dtype, device=weight.device)
            attn.v_cache = torch.zeros_like(attn.k_cache)

    def forward(self, input_ids: Tensor, ctx: ForwardContext) -> Tensor:
        first = self.model.layers[0] if self.model.layers else None
        if isinstance(first, LlamaDecoderLayer) and first.self_attn.k_cache.numel() == 0:
            raise RuntimeError("allocate_kv_cache before the first forward")
        return self.model(input_ids, ctx)

    def mtp_forward(self, input_ids: Tensor, hidden: Tensor, ctx: ForwardContext) -> Tensor:
        if not self.num_mtp_layers:
            return super().mtp_forward(input_ids, hidden, ctx)
        return self.model.mtp_forward(input_ids, hidden, ctx)

    def compute_logits(self, hidden: Tensor) -> Tensor:
        return self.lm_head(hidden).float()
