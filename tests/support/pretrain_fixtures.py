"""A small DeepSeek-V3 model folder and synthetic rows for the pretraining tests.

The rows are documents that count through the vocabulary with a stride (start and stride drawn
per document from a seeded generator): the next token follows from the two before it, so a
model that learns anything shows a falling loss within tens of steps. They are served through
the `RowSource` protocol the loop reads real packed data through, with the same rank striding.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.torch import save_file

from opencomposer.serving.model_recipes.tiny_moe import TINY_MOE_CONFIG, init_weights
from opencomposer.training.batch import PackedRow

SMALL_CONFIG: dict[str, Any] = TINY_MOE_CONFIG | {
    "vocab_size": 64,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "first_k_dense_replace": 1,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_group": 4,
    "topk_group": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "max_position_embeddings": 512,
    "bos_token_id": 0,
    "eos_token_id": 1,
}
"""tiny-moe's architecture (MLA with a query LoRA, a dense layer then MoE layers with a
shared expert, one MTP layer) at a size whose step takes well under a second on one core."""


def write_model(folder: Path, seed: int = 0, **overrides: Any) -> Path:
    """A seeded random checkpoint folder in the layout `load_model` reads, with tokenizer files
    (their contents are never parsed by pretraining, only copied)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = SMALL_CONFIG | overrides
    save_file(init_weights(config, seed), str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "tokenizer.json").write_text('{"model": "a test tokenizer"}')
    (folder / "tokenizer_config.json").write_text('{"bos_token": "<b>"}')
    return folder


class SyntheticRows:
    def __init__(self, vocab: int = 64, rows: int = 64, val_rows: int = 8) -> None:
        self.vocab = vocab
        self.sizes = {"train": rows, "val": val_rows}

    def count(self, split: str, seq_len: int) -> int:
        return self.sizes[split]

    def rows(
        self, split: str, seq_len: int, *, start: int, rank: int, world_size: int
    ) -> Iterator[PackedRow]:
        for index in range(start + rank, self.sizes[split], world_size):
            yield self.row(split, seq_len, index)

    def row(self, split: str, seq_len: int, index: int) -> PackedRow:
        rng = np.random.default_rng([0 if split == "train" else 1, seq_len, index])
        tokens, lengths = [], []
        while sum(lengths) < seq_len:
            length = min(int(rng.integers(seq_len // 4, seq_len)), seq_len - sum(lengths))
            first, stride = int(rng.integers(2, self.vocab)), int(rng.integers(1, 4))
            tokens += [2 + (first + i * stride) % (self.vocab - 2) for i in range(length)]
            lengths.append(length)
        return PackedRow(np.array(tokens, dtype=np.int32), tuple(lengths))
