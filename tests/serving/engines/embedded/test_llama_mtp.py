"""The Llama family's MTP block (DeepSeek-V3's layout on a Llama trunk): its weights load by
their checkpoint names, it computes what transformers' Llama decoder layer computes on the
combined input, the engine drafts with it losslessly, and checkpoints without it load with
MTP off."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from support.llama_mtp import LLAMA_TINY, llama_mtp_shapes, write_llama_checkpoint

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.loader import ModelLoadError, load_model
from opencomposer.serving.engines.embedded.sequence import SamplingOptions

transformers = pytest.importorskip("transformers")
hf_llama = pytest.importorskip("transformers.models.llama.modeling_llama")

PROMPTS = [[5, 9, 14, 3, 22, 7], [40, 41, 42], list(range(60, 90))]
TOKENS = 24


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    write_llama_checkpoint(tmp_path, mtp=True)
    return tmp_path


def engine(path: Path, **kwargs: bool) -> LLMEngine:
    config = EngineConfig(block_size=4, kv_cache_tokens=512, max_batch_tokens=32)
    return LLMEngine(load_model(path, **kwargs), config)


def test_mtp_block_matches_transformers_layers(checkpoint: Path) -> None:
    """enorm(embedding) then hnorm(hidden), eh_proj, a transformers LlamaDecoderLayer with a
    causal mask, shared_head.norm: the same numbers as our mtp_forward."""
    model = load_model(checkpoint)
    config = transformers.LlamaConfig(**LLAMA_TINY, attn_implementation="eager")
    weights = load_file(checkpoint / "mtp.safetensors")
    prefix = f"model.layers.{LLAMA_TINY['num_hidden_layers']}."
    layer = hf_llama.LlamaDecoderLayer(config, LLAMA_TINY["num_hidden_layers"]).eval()
    layer.load_state_dict(
        {
            k.removeprefix(prefix): v
            for k, v in weights.items()
            if not k.removeprefix(prefix).startswith(("enorm", "hnorm", "eh_proj", "shared_head"))
        }
    )
    norm = {n: hf_llama.LlamaRMSNorm(64, config.rms_norm_eps) for n in ("e", "h", "s")}
    norm["e"].weight.data = weights[prefix + "enorm.weight"]
    norm["h"].weight.data = weights[prefix + "hnorm.weight"]
    norm["s"].weight.data = weights[prefix + "shared_head.norm.weight"]
    ids = torch.tensor([3, 17, 99, 4, 4, 60, 2])
    hidden = torch.randn(len(ids), 64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model.allocate_kv_cache(len(ids))
        ours = model.mtp_forward(ids, hidden, ForwardContext.contiguous([len(ids)]))
        x = torch.cat([norm["e"](model.model.embed_tokens(ids)), norm["h"](hidden)], -1)
        x = (x @ weights[prefix + "eh_proj.weight"].T)[None]
        positions = torch.arange(len(ids))[None]
        rotary = hf_llama.LlamaRotaryEmbedding(config)
        mask = torch.full((len(ids), len(ids)), float("-inf")).triu(1)[None, None]
        out = layer(x, attention_mask=mask, position_embeddings=rotary(x, positions))
        out = out[0] if isinstance(out, tuple) else out
        expected = norm["s"](out[0])
    torch.testing.assert_close(ours, expected, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("draft_tokens", [1, 3])
def test_greedy_with_llama_mtp_drafts_equals_plain_greedy(
    checkpoint: Path, draft_tokens: int
) -> None:
    plain = engine(checkpoint).generate(PROMPTS, SamplingOptions(max_tokens=TOKENS))
    drafted = engine(checkpoint).generate(
        PROMPTS, SamplingOptions(max_tokens=TOKENS, draft_tokens=draft_tokens)
    )
    assert [s.output_ids for s in drafted] == [s.output_ids for s in plain]
    for seq in drafted:
        assert seq.spec.verify_steps > 0
        assert seq.spec.drafted == draft_tokens * seq.spec.verify_steps


def test_checkpoint_without_mtp_weights_loads_with_mtp_off(tmp_path: Path) -> None:
    write_llama_checkpoint(tmp_path, mtp=False)
    llm = engine(tmp_path)
    assert llm.model.num_mtp_layers == 0
    with pytest.raises(ValueError, match="no MTP layer"):
        llm.add([1, 2, 3], SamplingOptions(draft_tokens=2))


def test_mtp_off_skips_the_mtp_weights(checkpoint: Path) -> None:
    model = load_model(checkpoint, mtp=False)
    assert model.num_mtp_layers == 0
    assert len(model.model.layers) == LLAMA_TINY["num_hidden_layers"]


def test_config_asking_for_mtp_without_its_weights_names_them(checkpoint: Path) -> None:
    (checkpoint / "mtp.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"missing weights: model\.layers\.3\.eh_proj"):
        load_model(checkpoint)


def test_copies_of_the_shared_embedding_and_head_are_skipped(checkpoint: Path) -> None:
    """DeepSeek's checkpoints repeat them under the MTP layer; a Llama head may too."""
    extra = {
        "model.layers.3.embed_tokens.weight": torch.zeros(128, 64),
        "model.layers.3.shared_head.head.weight": torch.zeros(128, 64),
    }
    save_file(extra, str(checkpoint / "shared.safetensors"))
    model = load_model(checkpoint)
    assert float(model.model.embed_tokens.weight.detach().abs().sum()) > 0


def test_update_weights_reaches_the_mtp_layer(checkpoint: Path) -> None:
    llm = engine(checkpoint)
    names = list(llama_mtp_shapes(LLAMA_TINY))
    llm.update_weights({names[2]: torch.zeros(64, 128)})
    assert float(llm.model.model.layers[3].eh_proj.weight.detach().abs().sum()) == 0.0
