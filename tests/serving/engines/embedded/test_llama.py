"""The Llama family and the safetensors loader against transformers' LlamaForCausalLM.

A tiny random checkpoint is written with transformers' save_pretrained and loaded back with
`load_model`; every comparison is float32 logits (transformers in eager attention), whose
magnitude is about 6 here. Tolerance: 2e-5 absolute plus 1e-5 relative. Measured: full
forwards are bit-identical; a cached decode step differs by up to 1e-5 (half the allowance),
SDPA over one query row summing in another order than transformers' full recompute.
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.loader import (
    FAMILIES,
    ModelLoadError,
    family_class,
    load_model,
)
from opencomposer.serving.engines.embedded.models import layers
from opencomposer.serving.engines.embedded.models.llama import LlamaForCausalLM

transformers = pytest.importorskip("transformers")
hf_llama = pytest.importorskip("transformers.models.llama.modeling_llama")
rope_utils = pytest.importorskip("transformers.modeling_rope_utils")

TOLERANCE = {"atol": 2e-5, "rtol": 1e-5}
BLOCK_SIZE = 4
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}

CASES = {
    "plain": {},
    "tied": {"tie_word_embeddings": True},
    # A short original context puts most of a 16-dim head's wavelengths in the scaled bands.
    "llama3-rope": {"rope_scaling": LLAMA3_ROPE, "rope_theta": 500.0, "attention_bias": True},
}


def tiny_config(**overrides: object) -> "transformers.LlamaConfig":
    settings = {
        "vocab_size": 128,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
        "initializer_range": 0.2,
        **overrides,
    }
    return transformers.LlamaConfig(**settings, attn_implementation="eager")


def save_reference(path: Path, **overrides: object) -> "transformers.LlamaForCausalLM":
    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(tiny_config(**overrides)).eval()
    reference.save_pretrained(path, safe_serialization=True)
    return reference


@pytest.fixture(params=list(CASES))
def llama_pair(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple["transformers.LlamaForCausalLM", LlamaForCausalLM]:
    """(transformers' model, ours loaded from its save_pretrained folder)."""
    reference = save_reference(tmp_path, **CASES[request.param])
    if request.param == "llama3-rope":
        # Checkpoints from before transformers 5 keep rope_theta and rope_scaling apart.
        config = json.loads((tmp_path / "config.json").read_text())
        rope = config.pop("rope_parameters")
        config["rope_theta"] = rope.pop("rope_theta")
        config["rope_scaling"] = {"type": rope.pop("rope_type"), **rope}
        (tmp_path / "config.json").write_text(json.dumps(config))
    return reference, load_model(tmp_path)


def reference_logits(reference: "transformers.LlamaForCausalLM", ids: list[int]) -> torch.Tensor:
    return reference(torch.tensor([ids])).logits[0]


def full_logits(model: LlamaForCausalLM, ids: list[int]) -> torch.Tensor:
    model.allocate_kv_cache(len(ids))
    return model.compute_logits(model(torch.tensor(ids), ForwardContext.contiguous([len(ids)])))


def paged_step(
    model: LlamaForCausalLM, table: list[int], new: list[int], total: int
) -> torch.Tensor:
    ctx = ForwardContext.build([table], [len(new)], [total], BLOCK_SIZE)
    return model.compute_logits(model(torch.tensor(new), ctx))


@torch.no_grad()
def test_full_forward_matches_transformers(llama_pair) -> None:
    reference, model = llama_pair
    ids = torch.randint(0, 128, (13,), generator=torch.Generator().manual_seed(1)).tolist()
    torch.testing.assert_close(
        full_logits(model, ids), reference_logits(reference, ids), **TOLERANCE
    )


@torch.no_grad()
def test_greedy_decode_through_scattered_blocks_matches_recompute(llama_pair) -> None:
    reference, model = llama_pair
    table = [5, 2, 7, 0, 3]  # out of order, so a slot mix-up cannot go unnoticed
    model.allocate_kv_cache(8 * BLOCK_SIZE)
    ids = [3, 17, 99, 42, 8, 64]
    logits = paged_step(model, table, ids, len(ids))
    torch.testing.assert_close(logits, reference_logits(reference, ids), **TOLERANCE)
    for _ in range(12):
        ids.append(int(logits[-1].argmax()))
        logits = paged_step(model, table, ids[-1:], len(ids))
        torch.testing.assert_close(logits[0], reference_logits(reference, ids)[-1], **TOLERANCE)


@torch.no_grad()
def test_prefill_and_decode_in_one_batch_equal_each_alone(llama_pair) -> None:
    reference, model = llama_pair
    prompt, decoding = [5, 6, 7, 8, 9, 10, 11], [20, 21, 22, 23, 24, 25]
    tables = [[3, 6], [1, 4]]
    model.allocate_kv_cache(8 * BLOCK_SIZE)
    paged_step(model, tables[1], decoding[:-1], len(decoding) - 1)
    alone_decode = paged_step(model, tables[1], decoding[-1:], len(decoding))
    alone_prefill = paged_step(model, tables[0], prompt, len(prompt))

    model.allocate_kv_cache(8 * BLOCK_SIZE)
    paged_step(model, tables[1], decoding[:-1], len(decoding) - 1)
    ctx = ForwardContext.build(tables, [len(prompt), 1], [len(prompt), len(decoding)], BLOCK_SIZE)
    batched = model.compute_logits(model(torch.tensor(prompt + decoding[-1:]), ctx))

    torch.testing.assert_close(batched[:-1], alone_prefill, **TOLERANCE)
    torch.testing.assert_close(batched[-1:], alone_decode, **TOLERANCE)
    torch.testing.assert_close(batched[:-1], reference_logits(reference, prompt), **TOLERANCE)
    torch.testing.assert_close(batched[-1], reference_logits(reference, decoding)[-1], **TOLERANCE)


def test_tied_model_shares_one_weight(tmp_path: Path) -> None:
    save_reference(tmp_path, tie_word_embeddings=True)
    model = load_model(tmp_path)
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_loads_sharded_checkpoint_in_bfloat16(tmp_path: Path) -> None:
    reference = save_reference(tmp_path / "one")
    reference.save_pretrained(tmp_path / "sharded", max_shard_size="40KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    model = load_model(tmp_path / "sharded", dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model.model.rotary_emb.inv_freq.dtype == torch.float32
    assert model.half().model.rotary_emb.inv_freq.dtype == torch.float32  # casts keep it too
    model.bfloat16()
    expected = reference.model.layers[2].mlp.down_proj.weight.bfloat16()
    assert torch.equal(model.model.layers[2].mlp.down_proj.weight, expected)
    torch.testing.assert_close(
        full_logits(model, [1, 2, 3]),
        full_logits(load_model(tmp_path / "one"), [1, 2, 3]),
        atol=0.1,
        rtol=0.05,
    )


def test_missing_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load_model(tmp_path)


def test_unknown_model_type_lists_the_known_ones(tmp_path: Path) -> None:
    save_reference(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ModelLoadError, match=r"'gpt2' \(known: .*llama"):
        load_model(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("drop", "missing weights: model.norm.weight"),
        ("add", "unknown weight 'model.extra.weight'"),
        ("reshape", r"'model.norm.weight' has shape \(32,\), the model expects \(64,\)"),
    ],
)
def test_weight_mismatches_name_the_weight(tmp_path: Path, change: str, message: str) -> None:
    save_reference(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    if change == "drop":
        del tensors["model.norm.weight"]
    elif change == "add":
        tensors["model.extra.weight"] = torch.ones(2)
    else:
        tensors["model.norm.weight"] = torch.ones(32)
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(ModelLoadError, match=message):
        load_model(tmp_path)


def test_missing_weights_file_is_an_error(tmp_path: Path) -> None:
    save_reference(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"no \*\.safetensors weights"):
        load_model(tmp_path)


def test_registry_names_llama() -> None:
    assert FAMILIES["llama"].endswith(":LlamaForCausalLM")
    assert family_class("llama") is LlamaForCausalLM


def test_rms_norm_matches_transformers() -> None:
    torch.manual_seed(0)
    ours, theirs = layers.RMSNorm(64, eps=1e-5), hf_llama.LlamaRMSNorm(64, eps=1e-5)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    x = torch.randn(5, 64) * 3
    assert torch.equal(ours(x), theirs(x))
    assert torch.equal(ours.bfloat16()(x.bfloat16()), theirs.bfloat16()(x.bfloat16()))


@pytest.mark.parametrize("scaling", [None, {"rope_type": "linear", "factor": 4.0}, LLAMA3_ROPE])
def test_rope_matches_transformers(scaling: dict | None) -> None:
    config = tiny_config(rope_scaling=scaling, rope_theta=500.0)
    if scaling is None:
        init = hf_llama.LlamaRotaryEmbedding.compute_default_rope_parameters
    else:
        init = rope_utils.ROPE_INIT_FUNCTIONS[scaling["rope_type"]]
    expected_inv_freq, _ = init(config)
    inv_freq = layers.rope_inv_freq(16, layers.rope_parameters(config.to_dict()))
    assert torch.equal(inv_freq, expected_inv_freq)

    positions = torch.tensor([0, 1, 7, 30, 63])
    cos, sin = layers.RotaryEmbedding(inv_freq)(positions, torch.float32)
    expected_cos, expected_sin = hf_llama.LlamaRotaryEmbedding(config)(
        torch.zeros(1), positions[None]
    )
    assert torch.equal(cos, expected_cos[0]) and torch.equal(sin, expected_sin[0])
    q = torch.randn(5, 4, 16)
    expected_q, _ = hf_llama.apply_rotary_pos_emb(
        q.transpose(0, 1)[None], q.transpose(0, 1)[None], expected_cos, expected_sin
    )
    assert torch.equal(layers.apply_rotary(q, cos, sin), expected_q[0].transpose(0, 1))


def test_unsupported_rope_type_is_named() -> None:
    with pytest.raises(ValueError, match="unsupported rope_type 'yarn'"):
        layers.rope_inv_freq(16, {"rope_type": "yarn", "rope_theta": 1e4})
