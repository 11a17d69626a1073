"""DeepSeek-V3 and Kimi K2: MLA attention, DeepSeek-MoE feed-forward, one MTP layer.

The first `first_k_dense_replace` layers use a dense SwiGLU MLP, the rest a MoE: the
group-limited sigmoid router with a load-balancing bias (`route_grouped_topk`), the routed
experts stacked per layer for the grouped GEMM (`moe_experts`), plus always-on shared experts.

Checkpoint names are Hugging Face's: modules are named like the checkpoint, so most tensors
load by name; `Experts.load` takes a layer's experts both as the checkpoint stores them (one
`experts.{e}.{gate,up,down}_proj.weight` each) and as transformers holds them in memory
(fused `experts.gate_up_proj` and `experts.down_proj`).

The MTP layer (DeepSeek-V3 only; Kimi ships none) sits at layer index num_hidden_layers like
in the checkpoint. It reads the next token's embedding and the main model's *final normed*
hidden state, concatenated in that order, runs one full decoder block with its own cache at
the same slots, and ends in its own norm; the embedding and LM head are the main model's, so
the checkpoint's copies (`shared_head.head`, `embed_tokens` under the MTP layer) are skipped.
Build with `num_nextn_predict_layers = 0` to leave MTP out (its weights are then skipped).
"""

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from opencomposer.kernels.moe import moe_experts, route_grouped_topk
from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.models.layers import (
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    rope_parameters,
)
from opencomposer.serving.engines.embedded.models.mla import MultiHeadLatentAttention, rope_setup


@dataclass(frozen=True)
class DeepseekV3Config:
    """The config.json fields this family reads. Defaults are transformers' DeepseekV3Config
    defaults, except num_nextn_predict_layers: a config that does not ask for MTP gets none."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    moe_intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    n_routed_experts: int
    num_experts_per_tok: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    max_position_embeddings: int
    rope: dict[str, Any]
    q_lora_rank: int | None = 1536
    n_shared_experts: int = 1
    n_group: int = 8
    topk_group: int = 4
    first_k_dense_replace: int = 3
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 2.5
    scoring_func: Literal["sigmoid", "softmax"] = "sigmoid"
    rms_norm_eps: float = 1e-6
    rope_interleave: bool = True
    num_nextn_predict_layers: int = 0

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> "DeepseekV3Config":
        unsupported = {
            "hidden_act": "silu",
            "attention_bias": False,
            "topk_method": "noaux_tc",
            "moe_layer_freq": 1,
        }
        for key, supported in unsupported.items():
            if config.get(key, supported) != supported:
                raise ValueError(f"{key}={config[key]!r} is not supported (only {supported!r})")
        rope = rope_parameters(config)
        if rope["rope_type"] == "yarn":
            rope.setdefault("original_max_position_embeddings", config["max_position_embeddings"])
        fields = [f for f in dataclasses.fields(cls) if f.name != "rope"]
        for f in fields:
            if f.default is dataclasses.MISSING and f.name not in config:
                raise KeyError(f.name)
        return cls(rope=rope, **{f.name: config[f.name] for f in fields if f.name in config})


class Router(nn.Module):
    """Router logits in float32, as transformers computes them: the gate weight and the bias
    are created float32, so a model built in bfloat16 keeps them (a later cast would not)."""

    e_score_correction_bias: Tensor
    """[experts] float32, added to the scores for choosing experts only (a buffer)."""

    def __init__(self, config: DeepseekV3Config) -> None:
        super().__init__()
        self.config = config
        experts = config.n_routed_experts
        self.weight = nn.Parameter(torch.empty(experts, config.hidden_size, dtype=torch.float32))
        self.register_buffer("e_score_correction_bias", torch.zeros(experts, dtype=torch.float32))

    def forward(self, x: Tensor, expert_ids: Tensor | None = None) -> tuple[Tensor, Tensor]:
        c = self.config
        return route_grouped_topk(
            x.float() @ self.weight.float().T,
            top_k=c.num_experts_per_tok,
            n_group=c.n_group,
            topk_group=c.topk_group,
            correction_bias=self.e_score_correction_bias,
            scoring=c.scoring_func,
            norm_topk_prob=c.norm_topk_prob,
            routed_scaling_factor=c.routed_scaling_factor,
            expert_ids=expert_ids,
        )


class Experts(nn.Module):
    """A layer's routed experts, stacked: gate_proj, up_proj [E, f, d]; down_proj [E, d, f]."""

    PROJECTIONS = ("gate_proj", "up_proj", "down_proj")

    def __init__(self, num_experts: int, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Parameter(torch.empty(num_experts, intermediate, hidden))
        self.up_proj = nn.Parameter(torch.empty(num_experts, intermediate, hidden))
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden, intermediate))

    def forward(self, x: Tensor, ids: Tensor, weights: Tensor) -> Tensor:
        return moe_experts(x, ids, weights, self.gate_proj, self.up_proj, self.down_proj)

    def units(self) -> list[str]:
        """What `load` must have filled: '{expert}.{projection}' for every expert."""
        return [f"{e}.{p}" for e in range(len(self.gate_proj)) for p in self.PROJECTIONS]

    def targets(self, name: str, tensor: Tensor) -> tuple[list[tuple[Tensor, Tensor]], list[str]]:
        """Where one tensor named relative to this module goes ('7.up_proj.weight', or fused
        'gate_up_proj' [E, 2f, d] / 'down_proj' [E, d, f]): (view of ours, piece of it)
        pairs, and the units they fill."""
        match = re.fullmatch(r"(\d+)\.(gate_proj|up_proj|down_proj)\.weight", name)
        if match and int(match[1]) < len(self.gate_proj):
            expert, projection = int(match[1]), match[2]
            return [(getattr(self, projection)[expert], tensor)], [f"{expert}.{projection}"]
        if name == "gate_up_proj":
            gate, up = tensor.chunk(2, dim=1)
            units = [u for u in self.units() if not u.endswith("down_proj")]
            return [(self.gate_proj, gate), (self.up_proj, up)], units
        if name == "down_proj":
            return [(self.down_proj, tensor)], [u for u in self.units() if u.endswith("down_proj")]
        raise KeyError(f"unknown expert weight {name!r}")

    def load(self, name: str, tensor: Tensor) -> list[str]:
        """Copy one tensor named relative to this module; returns the units it filled."""
        pairs, units = self.targets(name, tensor)
        for view, piece in pairs:
            _copy(view, piece, name)
        return units


class MoE(nn.Module):
    def __init__(self, config: DeepseekV3Config, index: int) -> None:
        super().__init__()
        self.index = index
        """The decoder layer's index: the key of this layer's ids in `ctx.replay_experts`."""
        self.gate = Router(config)
        self.experts = Experts(
            config.n_routed_experts, config.hidden_size, config.moe_intermediate_size
        )
        self.shared_experts = SwiGLU(
            config.hidden_size, config.moe_intermediate_size * config.n_shared_experts
        )

    def forward(self, x: Tensor, ctx: ForwardContext) -> Tensor:
        weights, ids = self.gate(x, ctx.replay_experts.get(self.index))
        if ctx.capture_experts:
            ctx.routed_experts.append(ids.to(torch.int32))
        return self.experts(x, ids, weights) + self.shared_experts(x)


class DecoderLayer(nn.Module):
    def __init__(self, config: DeepseekV3Config, index: int, softmax_scale: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadLatentAttention(
            hidden_size=config.hidden_size,
            num_heads=config.num_attention_heads,
            q_lora_rank=config.q_lora_rank,
            kv_lora_rank=config.kv_lora_rank,
            qk_nope_head_dim=config.qk_nope_head_dim,
            qk_rope_head_dim=config.qk_rope_head_dim,
            v_head_dim=config.v_head_dim,
            softmax_scale=softmax_scale,
            rope_interleave=config.rope_interleave,
        )
        self.is_moe = index >= config.first_k_dense_replace
        self.mlp = (
            MoE(config, index)
            if self.is_moe
            else SwiGLU(config.hidden_size, config.intermediate_size)
        )
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x: Tensor, ctx: ForwardContext, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), ctx, cos, sin)
        h = self.post_attention_layernorm(x)
        return x + (self.mlp(h, ctx) if self.is_moe else self.mlp(h))


class SharedHead(nn.Module):
    """The MTP layer's final norm; its `head` is the main LM head, not stored here."""

    def __init__(self, config: DeepseekV3Config) -> None:
        super().__init__()
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class MTPLayer(DecoderLayer):
    def __init__(self, config: DeepseekV3Config, index: int, softmax_scale: float) -> None:
        super().__init__(config, index, softmax_scale)
        self.enorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.hnorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)
        self.shared_head = SharedHead(config)

    def predict(
        self, embeds: Tensor, hidden: Tensor, ctx: ForwardContext, cos: Tensor, sin: Tensor
    ) -> Tensor:
        x = self.eh_proj(torch.cat([self.enorm(embeds), self.hnorm(hidden)], dim=-1))
        return self.shared_head.norm(self(x, ctx, cos, sin))


class DeepseekV3Model(nn.Module):
    def __init__(self, config: DeepseekV3Config) -> None:
        super().__init__()
        inv_freq, self.attention_factor, scale = rope_setup(
            config.qk_rope_head_dim, config.rope, config.qk_nope_head_dim + config.qk_rope_head_dim
        )
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        layers: list[DecoderLayer] = [
            DecoderLayer(config, i, scale) for i in range(config.num_hidden_layers)
        ]
        if config.num_nextn_predict_layers:
            layers.append(MTPLayer(config, config.num_hidden_layers, scale))
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(inv_freq)

    def decoder_layers(self) -> list[DecoderLayer]:
        """The layers, MTP's included, as what they are: `nn.ModuleList` hands them out as
        plain modules."""
        return [layer for layer in self.layers if isinstance(layer, DecoderLayer)]

    def rope(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """cos, sin scaled by YaRN's attention factor in float32, then cast (as transformers)."""
        cos, sin = self.rotary_emb(positions, torch.float32)
        return (cos * self.attention_factor).to(dtype), (sin * self.attention_factor).to(dtype)


class DeepseekV3ForCausalLM(CausalLM):
    def __init__(self, config: DeepseekV3Config) -> None:
        super().__init__()
        self.config = config
        self.vocab_size, self.hidden_size = config.vocab_size, config.hidden_size
        self.max_positions = config.max_position_embeddings
        self.num_mtp_layers = min(config.num_nextn_predict_layers, 1)
        self.model = DeepseekV3Model(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "DeepseekV3ForCausalLM":
        return cls(DeepseekV3Config.from_dict(config))

    def forward(self, input_ids: Tensor, ctx: ForwardContext) -> Tensor:
        x = self.model.embed_tokens(input_ids)
        cos, sin = self.model.rope(ctx.positions, x.dtype)
        for layer in self.model.layers[: self.config.num_hidden_layers]:
            x = layer(x, ctx, cos, sin)
        return self.model.norm(x)

    def mtp_forward(self, input_ids: Tensor, hidden: Tensor, ctx: ForwardContext) -> Tensor:
        if not self.num_mtp_layers:
            return super().mtp_forward(input_ids, hidden, ctx)
        mtp: MTPLayer = self.model.layers[self.config.num_hidden_layers]  # type: ignore[assignment]
        embeds = self.model.embed_tokens(input_ids)
        cos, sin = self.model.rope(ctx.positions, embeds.dtype)
        return mtp.predict(embeds, hidden, ctx, cos, sin)

    def compute_logits(self, hidden: Tensor) -> Tensor:
        return self.lm_head(hidden).float()

    def allocate_kv_cache(self, num_slots: int, dtype: torch.dtype | None = None) -> None:
        weight = self.model.embed_tokens.weight
        for layer in self.model.decoder_layers():
            attn = layer.self_attn
            attn.cache = torch.zeros(
                num_slots,
                attn.kv_lora_rank + attn.rope_dim,
                dtype=dtype or weight.dtype,
                device=weight.device,
            )

    def _skipped(self, name: str) -> bool:
        """Rotary caches, copies of the shared embedding/head, and MTP layers not built."""
        if name.endswith("rotary_emb.inv_freq"):
            return True
        match = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name)
        if match is None or int(match[1]) < self.config.num_hidden_layers:
            return False
        mtp_index = int(match[1]) - self.config.num_hidden_layers
        return mtp_index >= self.num_mtp_layers or match[2] in (
            "shared_head.head.weight",
            "embed_tokens.weight",
        )

    def checkpoint_targets(self, name: str, tensor: Tensor) -> list[tuple[Tensor, Tensor]]:
        if self._skipped(name):
            return []
        owner, sep, rest = name.partition(".mlp.experts.")
        if sep:
            experts = self.get_submodule(f"{owner}.mlp.experts")
            if isinstance(experts, Experts):
                return experts.targets(rest, tensor)[0]
        state = self.own_tensors()
        if name not in state:
            raise KeyError(f"unknown weight {name!r} for {type(self).__name__}")
        return [(state[name], tensor)]

    @torch.no_grad()
    def load_weights(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        state = self.state_dict(keep_vars=True)
        experts = {name: m for name, m in self.named_modules() if isinstance(m, Experts)}
        expected = {n for n in state if n.rpartition(".")[0] not in experts}
        expected |= {f"{name}.{unit}" for name, m in experts.items() for unit in m.units()}
        loaded: set[str] = set()
        for name, tensor in weights:
            if self._skipped(name):
                continue
            owner, sep, rest = name.partition(".mlp.experts.")
            if sep and f"{owner}.mlp.experts" in experts:
                prefix = f"{owner}.mlp.experts"
                loaded.update(f"{prefix}.{u}" for u in experts[prefix].load(rest, tensor))
            elif name in state:
                _copy(state[name], tensor, name)
                loaded.add(name)
            else:
                raise KeyError(f"unknown weight {name!r} for {type(self).__name__}")
        if missing := sorted(expected - loaded):
            shown = ", ".join(missing[:8]) + (
                f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            )
            raise KeyError(f"missing weights: {shown}")


def _copy(target: Tensor, tensor: Tensor, name: str) -> None:
    """Copy (casting the dtype) under the caller's no_grad; shapes must match exactly, since
    copy_ would broadcast a wrong one."""
    if target.shape != tensor.shape:
        raise ValueError(
            f"{name!r} has shape {tuple(tensor.shape)}, the model expects {tuple(target.shape)}"
        )
    target.copy_(tensor)
