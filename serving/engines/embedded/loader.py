"""Build a model from a Hugging Face checkpoint folder: config.json plus safetensors shards.

`FAMILIES` maps each config.json `model_type` to the class that serves it, by import path, so
a family's module (and its dependencies) is imported only when a checkpoint needs it; it is the
one list of the families the engine knows. Tensors stream from the shards one at a time into a
model already built on the target device in the target dtype, so loading never holds a second
copy of the weights. `build_model` is the part shared with loaders of other file formats (GGUF),
which translate to Hugging Face names and config keys first.
"""

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any

import safetensors
import torch
from safetensors import safe_open
from torch import Tensor

from opencomposer.serving.engines.embedded.models.base import CausalLM

_MODELS = "opencomposer.serving.engines.embedded.models"

FAMILIES: dict[str, str] = {
    "llama": f"{_MODELS}.llama:LlamaForCausalLM",
    "deepseek_v3": f"{_MODELS}.deepseek_v3:DeepseekV3ForCausalLM",
    "kimi_k2": f"{_MODELS}.deepseek_v3:DeepseekV3ForCausalLM",
}
"""config.json `model_type` -> "module:class" of the `CausalLM` that serves it."""


DRAFT_VOCAB_FILE = "draft_vocab.safetensors"
"""The MTP layer's reduced draft vocabulary, beside the weights: one int64 tensor
`token_ids` (`CausalLM.use_draft_vocab`). Not a weight shard; absent: drafts score every token."""


SPECULATIVE_FILE = "speculative.json"
"""How many tokens the model's MTP layer drafts per step where it was measured fastest:
`{"draft_tokens": k, ...}`, written by `opencomposer engine bench --save`; 0 when no k beat
plain decoding there (then `engine.speculative = "auto"` does not speculate). Absent: the
engine's default."""

DEFAULT_DRAFT_TOKENS = 3


class ModelLoadError(Exception):
    """A checkpoint the engine cannot serve: what is wrong, and with which file or name."""


def family_class(model_type: str | None) -> type[CausalLM]:
    if model_type not in FAMILIES:
        raise ModelLoadError(
            f"unknown model_type {model_type!r} (known: {', '.join(sorted(FAMILIES))})"
        )
    module, _, name = FAMILIES[model_type].partition(":")
    try:
        return getattr(import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise ModelLoadError(
            f"model_type {model_type!r}: cannot import {FAMILIES[model_type]}: {error}"
        ) from error


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def build_model(
    config: dict[str, Any],
    weights: Iterable[tuple[str, Tensor]],
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    mtp: bool = True,
) -> CausalLM:
    """The model for a config.json dict, built on `device` in `dtype` (tensors a family
    creates with an explicit dtype, like float32 rotary frequencies, keep it), with `weights`
    (Hugging Face names) loaded, in eval mode. Without `mtp` it is built with no
    multi-token-prediction layers and skips their weights."""
    cls = family_class(config.get("model_type"))
    if not mtp:
        config = {**config, "num_nextn_predict_layers": 0}
    try:
        with torch.device(device), _default_dtype(dtype):
            model = cls.from_config(config)
    except KeyError as error:
        raise ModelLoadError(f"config.json has no {error.args[0]!r}") from error
    except ValueError as error:
        raise ModelLoadError(f"config.json: {error}") from error
    try:
        model.load_weights(weights)
    except (KeyError, ValueError) as error:
        raise ModelLoadError(str(error)) from error
    return model.eval()


def safetensors_files(path: Path) -> list[Path]:
    """The checkpoint's shards: those model.safetensors.index.json names when it exists,
    else every *.safetensors file of the folder."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        files = [
            path / name
            for name in sorted(set(json.loads(index.read_text())["weight_map"].values()))
        ]
        absent = [file.name for file in files if not file.is_file()]
        if absent:
            raise ModelLoadError(
                f"{path}: shards listed in {index.name} are missing: {', '.join(absent)}"
            )
        return files
    files = sorted(f for f in path.glob("*.safetensors") if f.name != DRAFT_VOCAB_FILE)
    if not files:
        raise ModelLoadError(f"{path}: no *.safetensors weights")
    return files


def iter_safetensors(path: Path) -> Iterator[tuple[str, Tensor]]:
    """(name, CPU tensor) for every tensor of the checkpoint, one file open at a time. Which
    files exist is checked on the call, before the first tensor is read."""
    files = safetensors_files(path)

    def tensors() -> Iterator[tuple[str, Tensor]]:
        for file in files:
            with safe_open(file, framework="pt", device="cpu") as shard:
                for name in shard.keys():  # noqa: SIM118 (a safe_open handle is no dict)
                    yield name, shard.get_tensor(name)

    return tensors()


def load_model(
    path: Path,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    mtp: bool = True,
) -> CausalLM:
    """The model of a Hugging Face checkpoint folder, ready for `allocate_kv_cache`."""
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(f"{path}: no config.json (not a Hugging Face checkpoint folder)")
    config = json.loads(config_file.read_text())
    weights = iter_safetensors(path)
    try:
        model = build_model(config, weights, device=device, dtype=dtype, mtp=mtp)
        if model.num_mtp_layers and (path / DRAFT_VOCAB_FILE).is_file():
            _use_draft_vocab(model, path / DRAFT_VOCAB_FILE)
    except ModelLoadError as error:
        raise ModelLoadError(f"{path}: {error}") from error
    return model


def model_draft_tokens(path: Path) -> int | None:
    """The drafts per step a model folder asks for (`SPECULATIVE_FILE`; 0: none pay), or
    None when it says nothing."""
    file = path / SPECULATIVE_FILE
    if not file.is_file():
        return None
    try:
        value = json.loads(file.read_text()).get("draft_tokens")
    except (ValueError, AttributeError) as error:
        raise ModelLoadError(f"{file}: not a JSON object ({error})") from error
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 8:
        raise ModelLoadError(f"{file}: draft_tokens must be a whole number from 0 to 8")
    return value


def draft_tokens_to_use(speculative: str, configured: int | None, measured: int | None) -> int:
    """Drafts per step for a model with an MTP layer: the configured number, else the
    model's own (under `auto` its 0 turns speculation off), else the default; `none`: 0."""
    if speculative == "none":
        return 0
    if configured:
        return configured
    if measured == 0:
        return 0 if speculative == "auto" else DEFAULT_DRAFT_TOKENS
    return measured or DEFAULT_DRAFT_TOKENS


def _use_draft_vocab(model: CausalLM, file: Path) -> None:
    try:
        with safe_open(file, framework="pt", device="cpu") as tensors:
            token_ids = tensors.get_tensor("token_ids")
        model.use_draft_vocab(token_ids)
    except (OSError, ValueError, RuntimeError, safetensors.SafetensorError) as error:
        raise ModelLoadError(f"{file.name}: {error}") from error
