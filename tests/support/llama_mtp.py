"""A tiny random Llama checkpoint with an MTP block in DeepSeek-V3's layout, for the engine's
and training's MTP tests: transformers' save_pretrained for the trunk, the MTP layer's weights
in their own `mtp.safetensors` beside it (how `opencomposer train mtp` writes a head)."""

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

LLAMA_TINY: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "initializer_range": 0.2,
    "tie_word_embeddings": True,
}


def llama_mtp_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Checkpoint name -> shape of the MTP block of a Llama config (the layout under test,
    written out independently of the model code)."""
    d, f = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = d // heads
    prefix = f"model.layers.{config['num_hidden_layers']}."
    shapes = {
        "enorm.weight": (d,),
        "hnorm.weight": (d,),
        "eh_proj.weight": (d, 2 * d),
        "shared_head.norm.weight": (d,),
        "input_layernorm.weight": (d,),
        "post_attention_layernorm.weight": (d,),
        "self_attn.q_proj.weight": (heads * head_dim, d),
        "self_attn.k_proj.weight": (kv * head_dim, d),
        "self_attn.v_proj.weight": (kv * head_dim, d),
        "self_attn.o_proj.weight": (d, heads * head_dim),
        "mlp.gate_proj.weight": (f, d),
        "mlp.up_proj.weight": (f, d),
        "mlp.down_proj.weight": (d, f),
    }
    return {prefix + name: shape for name, shape in shapes.items()}


def random_mtp_weights(config: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    """Unit-scale activations (norms near 1, matrices 1/sqrt(fan_in)), so drafts differ."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in llama_mtp_shapes(config).items():
        if len(shape) == 1:
            weights[name] = 1 + torch.randn(shape, generator=gen) * 0.2
        else:
            weights[name] = torch.randn(shape, generator=gen) / math.sqrt(shape[-1])
    return weights


def write_llama_checkpoint(path: Path, *, mtp: bool, seed: int = 0, **overrides: Any) -> Any:
    """save_pretrained of a seeded random transformers LlamaForCausalLM into `path`; with
    `mtp`, also mtp.safetensors and num_nextn_predict_layers = 1 in config.json. Returns
    transformers' model."""
    import transformers

    settings = {**LLAMA_TINY, **overrides}
    torch.manual_seed(seed)
    hf = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**settings, attn_implementation="eager")
    ).eval()
    hf.save_pretrained(path, safe_serialization=True)
    if mtp:
        config = json.loads((path / "config.json").read_text())
        config["num_nextn_predict_layers"] = 1
        (path / "config.json").write_text(json.dumps(config, indent=2))
        save_file(random_mtp_weights(settings, seed + 1), str(path / "mtp.safetensors"))
    return hf
