import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from opencomposer.agent.tools.code_index.embedder import (
    BertConfig,
    MiniLMEmbedder,
    ModelFilesError,
    find_model,
    load_weights,
)

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


@pytest.mark.parametrize("batch_size", [32, 3])
def test_matches_sentence_transformers(embedder: MiniLMEmbedder, batch_size: int) -> None:
    """The reference holds sentence-transformers' vectors, rounded to 6 decimals, for code,
    prose, Unicode, a one-letter text and a 467-token text cut at 256. Measured difference:
    6e-7, the rounding; 1e-4 leaves room for other CPUs' float32 kernels and stays far below
    anything that moves a ranking. Batch size 3 mixes lengths, testing padding and order."""
    reference = json.loads(REFERENCE.read_text())
    vectors = embedder.encode(reference["texts"], batch_size=batch_size)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, np.array(reference["vectors"]), rtol=0, atol=1e-4)


def test_vectors_are_unit_length_and_empty_input_is_empty(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.encode(["", "x", "def f(): pass"])
    assert vectors.shape == (3, embedder.dim) == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert embedder.encode([]).shape == (0, 384)


def test_find_model_needs_the_completed_pull(models_dir: Path, tmp_path: Path) -> None:
    assert find_model(models_dir) == models_dir / "all-minilm-l6-v2"
    (tmp_path / "all-minilm-l6-v2").mkdir()  # a pull that died before its manifest
    assert find_model(tmp_path) is None


TINY = BertConfig(
    vocab_size=10,
    hidden_size=4,
    num_layers=1,
    num_heads=2,
    intermediate_size=8,
    max_positions=6,
    type_vocab_size=2,
    layer_norm_eps=1e-12,
)


def test_loading_names_a_missing_tensor(tmp_path: Path) -> None:
    tensors = {name: torch.zeros(shape) for name, shape in TINY.weight_shapes().items()}
    del tensors["encoder.layer.0.attention.self.key.bias"]
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(
        ModelFilesError,
        match=r"no tensor 'encoder\.layer\.0\.attention\.self"
        r"\.key\.bias'",
    ):
        load_weights(tmp_path / "model.safetensors", TINY)


def test_loading_names_a_misshapen_tensor(tmp_path: Path) -> None:
    tensors = {name: torch.zeros(shape) for name, shape in TINY.weight_shapes().items()}
    tensors["embeddings.word_embeddings.weight"] = torch.zeros(11, 4)
    tensors["pooler.dense.weight"] = torch.zeros(4, 4)  # unused extras are fine
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(
        ModelFilesError,
        match=r"embeddings\.word_embeddings\.weight has shape \(11, 4\), "
        r"expected \(10, 4\)",
    ):
        load_weights(tmp_path / "model.safetensors", TINY)
