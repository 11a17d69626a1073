"""DeepSeek-V3 / Kimi K2 against transformers' DeepseekV3ForCausalLM, logit for logit.

Tiny seeded random checkpoints are written by transformers' save_pretrained (conftest's
`dsv3_checkpoint`) and read back by the engine's loader; transformers runs in float32 with
eager attention. Logits reach about 4 here. Tolerance: 1e-5 absolute plus 1e-5 relative.
Measured worst case 5.7e-6 (under half the allowance), in a paged decode step: attention over
a gathered context sums in another order than transformers' full recompute; full forwards
differ by at most 3.5e-6, absorbed from naive MLA by 3.6e-6.
"""

import json
from pathlib import Path

import pytest
import torch
from torch import Tensor

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.loader import ModelLoadError, load_model
from opencomposer.serving.engines.embedded.models.deepseek_v3 import DeepseekV3ForCausalLM
from opencomposer.serving.engines.embedded.models.layers import rope_parameters
from opencomposer.serving.engines.embedded.models.mla import (
    MultiHeadLatentAttention,
    apply_rotary_interleaved,
    rope_setup,
)

transformers = pytest.importorskip("transformers")
hf_dsv3 = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")
hf_layers = pytest.importorskip("transformers.modeling_layers")

TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
BLOCK_SIZE = 4
TABLE = [5, 2, 7, 0, 3]  # out of order, so a slot mix-up cannot go unnoticed
YARN = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 4.0,
    "beta_fast": 32,
    "beta_slow": 1,
    "original_max_position_embeddings": 16,
    "mscale": 1.0,
    "mscale_all_dim": 0.8,
}

CASES = {
    "q-lora": {},
    "no-q-lora-rotate-half": {"q_lora_rank": None, "rope_interleave": False},
    # Written as DeepSeek's own config.json does: rope_theta beside rope_scaling with "type".
    "yarn-legacy-config": {"rope_parameters": YARN},
    "kimi-k2": {"n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.827},
}


def legacy_rope_config(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    rope = config.pop("rope_parameters")
    config["rope_theta"] = rope.pop("rope_theta")
    config["rope_scaling"] = {"type": rope.pop("rope_type"), **rope}
    (path / "config.json").write_text(json.dumps(config))


def set_model_type(path: Path, model_type: str) -> None:
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "model_type": model_type}))


@pytest.fixture(params=list(CASES))
def pair(request: pytest.FixtureRequest, dsv3_checkpoint) -> tuple[object, DeepseekV3ForCausalLM]:
    """(transformers' model, ours loaded from its save_pretrained folder)."""
    checkpoint = dsv3_checkpoint(**CASES[request.param])
    if request.param == "yarn-legacy-config":
        legacy_rope_config(checkpoint.path)
    if request.param == "kimi-k2":
        set_model_type(checkpoint.path, "kimi_k2")
    return checkpoint.hf, load_model(checkpoint.path)


def reference_logits(hf: object, ids: list[int]) -> Tensor:
    return hf(torch.tensor([ids])).logits[0]


def full_hidden(model: DeepseekV3ForCausalLM, ids: list[int], **ctx_options: bool) -> Tensor:
    model.allocate_kv_cache(len(ids))
    return model(torch.tensor(ids), ForwardContext.contiguous([len(ids)], **ctx_options))


def paged_step(
    model: DeepseekV3ForCausalLM, table: list[int], new: list[int], total: int
) -> Tensor:
    ctx = ForwardContext.build([table], [len(new)], [total], BLOCK_SIZE)
    return model.compute_logits(model(torch.tensor(new), ctx))


def set_path(model: DeepseekV3ForCausalLM, path: str) -> None:
    for layer in model.model.layers:
        layer.self_attn.path = path


def random_ids(n: int, seed: int = 1) -> list[int]:
    return torch.randint(0, 128, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.no_grad()
def test_full_forward_matches_transformers(pair) -> None:
    hf, model = pair
    ids = random_ids(13)
    logits = model.compute_logits(full_hidden(model, ids))
    assert logits.dtype == torch.float32
    torch.testing.assert_close(logits, reference_logits(hf, ids), **TOLERANCE)


@pytest.mark.parametrize("path", ["naive", "absorbed", "auto"])
@torch.no_grad()
def test_paged_decode_matches_recompute(pair, path: str) -> None:
    hf, model = pair
    set_path(model, path)
    model.allocate_kv_cache(8 * BLOCK_SIZE)
    ids = random_ids(6, seed=2)
    # A prefill in two chunks, then greedy decoding.
    steps = [paged_step(model, TABLE, ids[:4], 4), paged_step(model, TABLE, ids[4:], 6)]
    for _ in range(10):
        ids.append(int(steps[-1][-1].argmax()))
        steps.append(paged_step(model, TABLE, ids[-1:], len(ids)))
    # Causal attention: the recompute of the whole sequence holds every step's expected logits.
    torch.testing.assert_close(torch.cat(steps), reference_logits(hf, ids), **TOLERANCE)


@torch.no_grad()
def test_absorbed_attention_equals_naive(pair) -> None:
    _, model = pair
    ids = random_ids(11, seed=3)
    set_path(model, "naive")
    naive = full_hidden(model, ids)
    set_path(model, "absorbed")
    torch.testing.assert_close(full_hidden(model, ids), naive, **TOLERANCE)


def test_auto_path_absorbs_only_short_queries_over_long_contexts() -> None:
    with torch.device("meta"):  # DeepSeek-V3's dimensions, no memory
        attn = MultiHeadLatentAttention(
            hidden_size=7168,
            num_heads=128,
            q_lora_rank=1536,
            kv_lora_rank=512,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            v_head_dim=128,
            softmax_scale=1.0,
            rope_interleave=True,
        )
    assert attn._absorb(1, 4096) and attn._absorb(8, 300)
    assert not attn._absorb(4096, 4096) and not attn._absorb(1, 1)


@torch.no_grad()
def test_routed_expert_capture_matches_transformers_router(pair) -> None:
    hf, model = pair
    ids = random_ids(9, seed=4)
    chosen = []
    hooks = [
        layer.mlp.gate.register_forward_hook(lambda _m, _i, out: chosen.append(out[2]))
        for layer in hf.model.layers
        if isinstance(layer.mlp, hf_dsv3.DeepseekV3MoE)
    ]
    reference_logits(hf, ids)
    for hook in hooks:
        hook.remove()
    model.allocate_kv_cache(len(ids))
    ctx = ForwardContext.contiguous([len(ids)], capture_experts=True)
    model(torch.tensor(ids), ctx)
    assert len(ctx.routed_experts) == len(chosen) == 2
    for ours, theirs in zip(ctx.routed_experts, chosen, strict=True):
        assert ours.dtype == torch.int32 and ours.shape == (9, 2)
        assert torch.equal(ours.sort(dim=-1)[0], theirs.sort(dim=-1)[0].int())


def moe_layer_indices(model: DeepseekV3ForCausalLM) -> list[int]:
    return [i for i, layer in enumerate(model.model.decoder_layers()) if layer.is_moe]


@torch.no_grad()
def test_replaying_the_chosen_experts_reproduces_the_logits(dsv3_checkpoint) -> None:
    model = load_model(dsv3_checkpoint(**CASES["q-lora"]).path)
    ids = random_ids(9, seed=6)
    model.allocate_kv_cache(len(ids))
    live = ForwardContext.contiguous([len(ids)], capture_experts=True)
    want = model.compute_logits(model(torch.tensor(ids), live))
    layers = moe_layer_indices(model)[: len(live.routed_experts)]
    assert len(layers) == len(live.routed_experts) == 2

    replay = ForwardContext.contiguous([len(ids)], capture_experts=True)
    replay.replay_experts = dict(zip(layers, live.routed_experts, strict=True))
    got = model.compute_logits(model(torch.tensor(ids), replay))
    assert torch.equal(got, want)
    for reported, chosen in zip(replay.routed_experts, live.routed_experts, strict=True):
        assert torch.equal(reported, chosen)

    other = {
        i: (chosen.long() + 1) % model.config.n_routed_experts
        for i, chosen in zip(layers, live.routed_experts, strict=True)
    }
    forced = ForwardContext.contiguous([len(ids)], capture_experts=True)
    forced.replay_experts = other
    changed = model.compute_logits(model(torch.tensor(ids), forced))
    assert not torch.allclose(changed, want)
    for reported, replayed in zip(forced.routed_experts, other.values(), strict=True):
        assert torch.equal(reported.long(), replayed)


@torch.no_grad()
def test_batch_equals_each_sequence_alone(pair) -> None:
    _, model = pair
    a, b = random_ids(7, seed=5), random_ids(4, seed=6)
    model.allocate_kv_cache(11)
    both = model(torch.tensor(a + b), ForwardContext.contiguous([7, 4]))
    torch.testing.assert_close(both[:7], full_hidden(model, a), **TOLERANCE)
    torch.testing.assert_close(both[7:], full_hidden(model, b), **TOLERANCE)

    # A prefill and another sequence's decode step in one paged batch.
    tables = [[3, 6], [1, 4]]
    model.allocate_kv_cache(8 * BLOCK_SIZE)
    paged_step(model, tables[1], b[:-1], 3)
    alone_decode = paged_step(model, tables[1], b[-1:], 4)
    alone_prefill = paged_step(model, tables[0], a, 7)
    model.allocate_kv_cache(8 * BLOCK_SIZE)
    paged_step(model, tables[1], b[:-1], 3)
    ctx = ForwardContext.build(tables, [7, 1], [7, 4], BLOCK_SIZE)
    batched = model.compute_logits(model(torch.tensor(a + b[-1:]), ctx))
    torch.testing.assert_close(batched[:7], alone_prefill, **TOLERANCE)
    torch.testing.assert_close(batched[7:], alone_decode, **TOLERANCE)


@torch.no_grad()
def test_loads_transformers_fused_expert_names(dsv3_checkpoint) -> None:
    checkpoint = dsv3_checkpoint()
    assert "model.layers.1.mlp.experts.gate_up_proj" in checkpoint.hf.state_dict()
    from_file = load_model(checkpoint.path)
    from_memory = DeepseekV3ForCausalLM.from_config(checkpoint.hf.config.to_dict())
    from_memory.load_weights(checkpoint.hf.state_dict().items())
    for (name, ours), (_, theirs) in zip(
        from_memory.state_dict().items(), from_file.state_dict().items(), strict=True
    ):
        assert torch.equal(ours, theirs), name


@torch.no_grad()
def test_bfloat16_build_keeps_router_in_float32(dsv3_checkpoint) -> None:
    checkpoint = dsv3_checkpoint()
    model = load_model(checkpoint.path, dtype=torch.bfloat16)
    gate = model.model.layers[1].mlp.gate
    assert gate.weight.dtype == gate.e_score_correction_bias.dtype == torch.float32
    assert model.model.layers[1].mlp.experts.gate_proj.dtype == torch.bfloat16
    ids = random_ids(8, seed=9)
    logits = model.compute_logits(full_hidden(model, ids))
    assert model.model.layers[0].self_attn.cache.dtype == torch.bfloat16
    # bfloat16 weights and activations: measured 0.07 on logits up to 4.
    torch.testing.assert_close(logits, reference_logits(checkpoint.hf, ids), atol=0.15, rtol=0.05)


def test_rope_interleaved_matches_transformers() -> None:
    x = torch.randn(5, 3, 8)
    cos, sin = torch.randn(5, 8), torch.randn(5, 8)
    cos, sin = torch.cat([cos[:, :4]] * 2, -1), torch.cat([sin[:, :4]] * 2, -1)
    heads_first = x.transpose(0, 1)[None]
    expected, _ = hf_dsv3.apply_rotary_pos_emb_interleave(
        heads_first, heads_first, cos[None], sin[None]
    )
    assert torch.equal(apply_rotary_interleaved(x, cos, sin), expected[0].transpose(0, 1))


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default", "rope_theta": 10000.0},
        # DeepSeek-V3's and Kimi K2's published settings, and one with every knob distinct.
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
        {
            "rope_type": "yarn",
            "rope_theta": 50000.0,
            "factor": 32.0,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
        {**YARN, "mscale": 0.9},
    ],
)
def test_rope_tables_match_transformers(rope: dict) -> None:
    config = transformers.DeepseekV3Config(
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        max_position_embeddings=163840,
        rope_parameters=rope,
    )
    inv_freq, attention_factor, scale = rope_setup(
        64, rope_parameters(config.to_dict()), config.qk_nope_head_dim + 64
    )
    rotary = hf_dsv3.DeepseekV3RotaryEmbedding(config)
    assert torch.equal(inv_freq, rotary.inv_freq)
    assert attention_factor == rotary.attention_scaling
    with torch.device("meta"):
        assert scale == hf_dsv3.DeepseekV3Attention(config, 0).scaling


def mtp_reference(checkpoint, ids: list[int]) -> tuple[Tensor, Tensor]:
    """DeepSeek-V3's MTP layer, written out from its description with transformers' pieces:
    (final normed hidden states of the main model, MTP logits predicting ids[i + 2] from
    hidden i and token i + 1)."""
    hf, layer = checkpoint.hf, checkpoint.mtp
    tokens = torch.tensor([ids])
    hidden = hf.model(tokens).last_hidden_state
    embeds = hf.model.embed_tokens(tokens[:, 1:])
    x = layer["eh_proj"](torch.cat([layer["enorm"](embeds), layer["hnorm"](hidden[:, :-1])], -1))
    n = len(ids) - 1
    positions = torch.arange(n)[None]
    mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
    x = layer["block"](
        x,
        attention_mask=mask,
        position_ids=positions,
        position_embeddings=hf.model.rotary_emb(x, positions),
    )
    return hidden[0], hf.lm_head(layer["norm"](x))[0]


@torch.no_grad()
def test_mtp_reference_is_transformers_mtp_layer(dsv3_checkpoint) -> None:
    checkpoint = dsv3_checkpoint(mtp=True)
    hf, layer = checkpoint.hf, checkpoint.mtp
    ids = random_ids(10, seed=7)
    hidden, expected = mtp_reference(checkpoint, ids)
    theirs = hf_layers.MtpLayer(
        hf.config,
        hf_dsv3.DeepseekV3DecoderLayer,
        hf_dsv3.DeepseekV3RMSNorm,
        hf.config.num_hidden_layers,
    ).eval()
    theirs.load_state_dict(
        {
            "enorm.weight": layer["enorm"].weight,
            "hnorm.weight": layer["hnorm"].weight,
            "eh_proj.weight": layer["eh_proj"].weight,
            "post_norm.weight": layer["norm"].weight,
            **{f"mtp_block.{k}": v for k, v in layer["block"].state_dict().items()},
        }
    )
    positions = torch.arange(9)[None]
    embeds = hf.model.embed_tokens(torch.tensor([ids[1:]]))
    out = theirs(
        embeds,
        hidden[None, :-1],
        hf.model.rotary_emb(embeds, positions),
        torch.full((9, 9), float("-inf")).triu(1)[None, None],
        positions,
        None,
    )
    torch.testing.assert_close(hf.lm_head(out)[0], expected, atol=0, rtol=0)


@torch.no_grad()
def test_mtp_matches_reference(dsv3_checkpoint) -> None:
    checkpoint = dsv3_checkpoint(mtp=True)
    model = load_model(checkpoint.path)
    assert model.num_mtp_layers == 1
    ids = random_ids(10, seed=8)
    hidden, expected = mtp_reference(checkpoint, ids)
    ours_hidden = full_hidden(model, ids)
    torch.testing.assert_close(ours_hidden, hidden, **TOLERANCE)
    mtp = model.mtp_forward(torch.tensor(ids[1:]), ours_hidden[:-1], ForwardContext.contiguous([9]))
    torch.testing.assert_close(model.compute_logits(mtp), expected, **TOLERANCE)

    # Step by step through its own paged cache, one (hidden i, token i + 1) pair at a time.
    model.allocate_kv_cache(8 * BLOCK_SIZE)
    for i in range(9):
        ctx = ForwardContext.build([TABLE], [1], [i + 1], BLOCK_SIZE)
        step = model.mtp_forward(torch.tensor(ids[i + 1 : i + 2]), ours_hidden[i : i + 1], ctx)
        torch.testing.assert_close(model.compute_logits(step)[0], expected[i], **TOLERANCE)


def test_missing_mtp_weight_is_named(dsv3_checkpoint) -> None:
    checkpoint = dsv3_checkpoint(mtp=True)
    (checkpoint.path / "mtp.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"missing weights: model\.layers\.3\.eh_proj"):
        load_model(checkpoint.path)


def test_mtp_weights_are_skipped_when_built_without_mtp(dsv3_checkpoint) -> None:
    checkpoint = dsv3_checkpoint(mtp=True)
    model = load_model(checkpoint.path, mtp=False)
    assert model.num_mtp_layers == 0 and len(model.model.layers) == 3
    with pytest.raises(TypeError, match="no multi-token-prediction layer"):
        model.mtp_forward(torch.tensor([1]), torch.zeros(1, 64), ForwardContext.contiguous([1]))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("drop-expert", r"missing weights: model\.layers\.1\.mlp\.experts\.5\.up_proj'$"),
        ("add", "unknown weight 'model.layers.1.mlp.extra.weight'"),
        ("bad-expert", "unknown expert weight '9.up_proj.weight'"),
        (
            "reshape",
            r"'model.layers.2.mlp.gate.weight' has shape \(8, 32\), the model expects "
            r"\(8, 64\)",
        ),
    ],
)
def test_weight_mismatches_name_the_weight(dsv3_checkpoint, edit: str, message: str) -> None:
    from safetensors.torch import load_file, save_file

    checkpoint = dsv3_checkpoint()
    file = checkpoint.path / "model.safetensors"
    tensors = load_file(file)
    if edit == "drop-expert":
        del tensors["model.layers.1.mlp.experts.5.up_proj.weight"]
    elif edit == "add":
        tensors["model.layers.1.mlp.extra.weight"] = torch.ones(2)
    elif edit == "bad-expert":
        tensors["model.layers.1.mlp.experts.9.up_proj.weight"] = torch.ones(32, 64)
    else:
        tensors["model.layers.2.mlp.gate.weight"] = torch.ones(8, 32)
    save_file(tensors, file)
    with pytest.raises(ModelLoadError, match=message):
        load_model(checkpoint.path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"kv_lora_rank": None}, "config.json has no 'kv_lora_rank'"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu' is not supported"),
    ],
)
def test_config_errors(dsv3_checkpoint, edit: dict, message: str) -> None:
    checkpoint = dsv3_checkpoint()
    config = json.loads((checkpoint.path / "config.json").read_text())
    config |= edit
    config = {k: v for k, v in config.items() if v is not None}
    (checkpoint.path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=message):
        load_model(checkpoint.path)
