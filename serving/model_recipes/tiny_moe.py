"""`tiny-moe`: a CPU-sized model of the DeepSeek-V3 architecture, created here with seeded random
weights for `training/` to train (`opencomposer models init tiny-moe`). The model store calls
it, so it sits in `serving/` outside the engine, which only loads checkpoints (the package
docstring says why not in `training/`).

Everything real checkpoints have is here at toy scale, so the engine's production path runs on a
laptop: MLA with a query LoRA, a dense first layer then DeepSeekMoE layers (sigmoid routing with
a correction bias, group-limited top-k, a shared expert), and one MTP layer stored where
DeepSeek-V3 stores it, `model.layers.{num_hidden_layers}`. The checkpoint is written in the
Hugging Face layout of the released models (per-expert tensors), so the same loader reads it and
DeepSeek-V3 itself.

Its tokenizer is a byte-level BPE trained (offline, seconds) on a snapshot of opencomposer's
own Python sources shipped beside this file, with DeepSeek's chat markers as special tokens:
the model speaks the built-in `deepseek_v3` chat format. A small vocabulary keeps the
embedding and LM head (which would dominate a 49k-vocabulary model of this width)
proportionate to the body.
"""

import hashlib
import json
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from opencomposer.serving.engines.embedded.chat_format import (
    DEEPSEEK_BOS,
    DEEPSEEK_EOS,
    DEEPSEEK_SPECIAL_TOKENS,
)

VOCAB_SIZE = 4096
CORPUS = Path(__file__).with_name("tiny_moe_corpus.tar.xz")
"""The tokenizer's training corpus: opencomposer's Python sources as of 2026-12-02 (190 files).
A snapshot, not the installed sources, so that the model depends on its seed alone: trained on
the live sources, every edit to the package changed the tokenizer, and with it everything the
seeded model generates."""

TINY_MOE_CONFIG: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 4,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "n_routed_experts": 16,
    "num_experts_per_tok": 4,
    "n_group": 4,
    "topk_group": 2,
    "n_shared_experts": 1,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "topk_method": "noaux_tc",
    "norm_topk_prob": True,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 96,
    "kv_lora_rank": 64,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "num_nextn_predict_layers": 1,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "rope_interleave": True,
    "rms_norm_eps": 1e-6,
    "initializer_range": 0.02,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
"""Everything but the vocabulary and the special token ids, which come from the tokenizer."""


def deepseek_v3_weight_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor of a DeepSeek-V3 checkpoint with this config.json. The MTP
    layers' `embed_tokens` and `shared_head.head` are left out: they are the main model's
    embedding and LM head (engines point at those), so they are not stored twice."""
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    layers = config["num_hidden_layers"]
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden)}
    for index in range(layers + config.get("num_nextn_predict_layers", 0)):
        prefix = f"model.layers.{index}."
        if index >= layers:  # an MTP layer: its input projection and norms, then a block
            shapes |= {
                prefix + "enorm.weight": (hidden,),
                prefix + "hnorm.weight": (hidden,),
                prefix + "eh_proj.weight": (hidden, 2 * hidden),
                prefix + "shared_head.norm.weight": (hidden,),
            }
        shapes |= {
            prefix + "input_layernorm.weight": (hidden,),
            prefix + "post_attention_layernorm.weight": (hidden,),
        }
        shapes |= {prefix + "self_attn." + k: v for k, v in _attention_shapes(config).items()}
        shapes |= {prefix + "mlp." + k: v for k, v in _mlp_shapes(config, index).items()}
    shapes |= {"model.norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}
    return shapes


def _attention_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    nope, rope = config["qk_nope_head_dim"], config["qk_rope_head_dim"]
    q_rank, kv_rank, v_dim = config.get("q_lora_rank"), config["kv_lora_rank"], config["v_head_dim"]
    shapes: dict[str, tuple[int, ...]] = (
        {
            "q_a_proj.weight": (q_rank, hidden),
            "q_a_layernorm.weight": (q_rank,),
            "q_b_proj.weight": (heads * (nope + rope), q_rank),
        }
        if q_rank
        else {"q_proj.weight": (heads * (nope + rope), hidden)}
    )
    return shapes | {
        "kv_a_proj_with_mqa.weight": (kv_rank + rope, hidden),
        "kv_a_layernorm.weight": (kv_rank,),
        "kv_b_proj.weight": (heads * (nope + v_dim), kv_rank),
        "o_proj.weight": (hidden, heads * v_dim),
    }


def _ffn(prefix: str, hidden: int, inner: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}gate_proj.weight": (inner, hidden),
        f"{prefix}up_proj.weight": (inner, hidden),
        f"{prefix}down_proj.weight": (hidden, inner),
    }


def _mlp_shapes(config: dict[str, Any], index: int) -> dict[str, tuple[int, ...]]:
    hidden, experts = config["hidden_size"], config.get("n_routed_experts") or 0
    dense = (
        not experts
        or index < config.get("first_k_dense_replace", 0)
        or index % config.get("moe_layer_freq", 1)
    )
    if dense:
        return _ffn("", hidden, config["intermediate_size"])
    inner = config["moe_intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "gate.weight": (experts, hidden),
        "gate.e_score_correction_bias": (experts,),
    }
    for expert in range(experts):
        shapes |= _ffn(f"experts.{expert}.", hidden, inner)
    if shared := config.get("n_shared_experts"):
        shapes |= _ffn("shared_experts.", hidden, inner * shared)
    return shapes


def init_weights(config: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    """Seeded float32 weights: N(0, initializer_range) matrices, norms at 1, biases at 0."""
    generator = torch.Generator().manual_seed(seed)
    std = config.get("initializer_range", 0.02)
    weights = {}
    for name, shape in deepseek_v3_weight_shapes(config).items():
        if name.endswith("norm.weight"):
            weights[name] = torch.ones(shape)
        elif name.endswith("e_score_correction_bias"):
            weights[name] = torch.zeros(shape)
        else:
            weights[name] = torch.randn(shape, generator=generator) * std
    return weights


def corpus_texts() -> list[str]:
    """The corpus's files, in their fixed order."""
    with tarfile.open(CORPUS, "r:xz") as archive:
        members = sorted((m for m in archive.getmembers() if m.isfile()), key=lambda m: m.name)
        return [_read(archive, member) for member in members]


def _read(archive: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    stream = archive.extractfile(member)
    assert stream is not None  # a regular file has contents
    return stream.read().decode("utf-8", errors="replace")


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE (GPT-2 splitting, digits one by one) with DeepSeek's chat, tool and FIM
    markers first (BOS is id 0, EOS id 1) and kept whole. `texts` may be a stream (training's
    corpus is): the trainer counts words as they come."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=list(DEEPSEEK_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def write_tokenizer(tokenizer: Tokenizer, into: Path) -> None:
    """tokenizer.json and the tokenizer_config.json that names BOS and EOS (the engine reads
    both): the same files for the seeded model and for one trained by `training/`."""
    tokenizer.save(str(into / "tokenizer.json"))
    (into / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "bos_token": DEEPSEEK_BOS,
                "eos_token": DEEPSEEK_EOS,
                "pad_token": DEEPSEEK_EOS,
                "add_bos_token": False,
                "add_eos_token": False,
            },
            ensure_ascii=False,
            indent=2,
        )
        + "\n"
    )


def build_tiny_moe(into: Path, seed: int) -> dict[str, Any]:
    """Write config.json, model.safetensors, tokenizer.json and tokenizer_config.json into the
    existing folder `into`; returns what the manifest records about them."""
    texts = corpus_texts()
    tokenizer = train_tokenizer(texts)
    bos, eos = tokenizer.token_to_id(DEEPSEEK_BOS), tokenizer.token_to_id(DEEPSEEK_EOS)
    config = TINY_MOE_CONFIG | {
        "vocab_size": tokenizer.get_vocab_size(),
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": eos,
    }
    weights = init_weights(config, seed)
    save_file(weights, str(into / "model.safetensors"), metadata={"format": "pt"})
    (into / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_tokenizer(tokenizer, into)
    return {
        "parameters": sum(t.numel() for t in weights.values()),
        "tokenizer_corpus": {
            "files": len(texts),
            "sha256": hashlib.sha256(CORPUS.read_bytes()).hexdigest(),
        },
    }
