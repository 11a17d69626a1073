"""An MTP layer on top of a checkpoint: built fresh when it ships none, saved as its own file.

`load_with_mtp` builds any engine family (deepseek_v3, kimi_k2, llama) with
`num_nextn_predict_layers = 1`; a checkpoint without MTP weights gets a fresh layer initialised
like `tiny_moe.init_weights` (N(0, initializer_range) matrices, norms at 1, biases and the
router's correction bias at 0) — for DeepSeek-V3 a full decoder layer, MoE included.

`save_mtp_folder` writes a model folder the engine serves with MTP on: config.json asking for
one MTP layer, the MTP layer alone in `mtp.safetensors` (checkpoint names, per-expert tensors,
the checkpoint's dtype), the trunk's shards linked (or copied), and the tokenizer files. The
loader reads every *.safetensors of a folder, or, when the trunk is sharded with an index,
only the files the index names, so the index written here maps the MTP names to
mtp.safetensors. A trunk that already holds MTP weights (DeepSeek-V3's own) still loads them
first; mtp.safetensors sorts after its `model*` shards, so the new head wins.
"""

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

from opencomposer.serving.engines.embedded.loader import (
    ModelLoadError,
    family_class,
    iter_safetensors,
    safetensors_files,
)
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.training.errors import TrainingError

MTP_FILE = "mtp.safetensors"
INDEX_FILE = "model.safetensors.index.json"
NOT_COPIED = {"config.json", INDEX_FILE, "opencomposer-model.json"}
"""Files of the source folder not carried over: rewritten here, or the model store's
manifest of the source (which describes other weights)."""


def mtp_prefix(config: dict[str, Any]) -> str:
    return f"model.layers.{config['num_hidden_layers']}."


def read_config(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "config.json"
    if not path.is_file():
        raise TrainingError(f"{model_dir}: no config.json (not a Hugging Face model folder)")
    config: dict[str, Any] = json.loads(path.read_text())
    return config


def _has_mtp_weights(model_dir: Path, config: dict[str, Any]) -> bool:
    """Whether any shard holds a tensor of the MTP layer (names only; nothing is read)."""
    prefix = mtp_prefix(config)
    for file in safetensors_files(model_dir):
        with safe_open(file, framework="pt", device="cpu") as shard:
            if any(name.startswith(prefix) for name in shard.keys()):  # noqa: SIM118
                return True
    return False


def init_mtp_(model: CausalLM, config: dict[str, Any], seed: int) -> None:
    """Fresh MTP weights in place, as `tiny_moe.init_weights` initialises a model."""
    generator = torch.Generator().manual_seed(seed)
    std = config.get("initializer_range", 0.02)
    with torch.no_grad():
        for name, tensor in mtp_tensors(model, config).items():
            if name.endswith("norm.weight"):
                tensor.fill_(1.0)
            elif name.endswith(("e_score_correction_bias", ".bias")):
                tensor.zero_()
            else:
                noise = torch.randn(tensor.shape, generator=generator) * std
                tensor.copy_(noise.to(tensor.dtype))


def mtp_tensors(model: CausalLM, config: dict[str, Any]) -> dict[str, Tensor]:
    """The MTP layer's own parameters and buffers, by model name."""
    prefix = mtp_prefix(config)
    return {n: t for n, t in model.own_tensors().items() if n.startswith(prefix)}


def checkpoint_names(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Model names -> checkpoint names: stacked experts split into one tensor per expert."""
    out = {}
    for name, tensor in tensors.items():
        match = re.fullmatch(r"(.+\.mlp\.experts)\.(gate_proj|up_proj|down_proj)", name)
        if match:
            for expert, piece in enumerate(tensor):
                out[f"{match[1]}.{expert}.{match[2]}.weight"] = piece
        else:
            out[name] = tensor
    return out


def load_with_mtp(
    model_dir: Path, *, device: str | torch.device = "cpu", seed: int = 0
) -> tuple[CausalLM, dict[str, Any], bool]:
    """(model in float32 with one MTP layer, its config.json dict, whether the MTP layer is
    fresh). Its own MTP weights are kept when the checkpoint has them."""
    source = read_config(model_dir)
    config = {**source, "num_nextn_predict_layers": 1}
    try:
        cls = family_class(config.get("model_type"))
        fresh = not (source.get("num_nextn_predict_layers") and _has_mtp_weights(model_dir, config))
        with torch.device(device):
            model = cls.from_config(config)
        if not model.num_mtp_layers:
            raise TrainingError(f"{cls.__name__} cannot build an MTP layer")
        if fresh:
            init_mtp_(model, config, seed)
        model.load_weights(_weights(model, config, model_dir, fresh))
    except ModelLoadError as error:
        raise TrainingError(f"{model_dir}: {error}") from error
    except (KeyError, ValueError) as error:
        raise TrainingError(f"{model_dir}: {error}") from error
    return model.eval(), config, fresh


def _weights(
    model: CausalLM, config: dict[str, Any], model_dir: Path, fresh: bool
) -> Iterator[tuple[str, Tensor]]:
    """The checkpoint's tensors, streamed; with a fresh MTP layer, its initial values in
    place of any stale MTP tensors the shards hold."""
    prefix = mtp_prefix(config)
    for name, tensor in iter_safetensors(model_dir):
        if not (fresh and name.startswith(prefix)):
            yield name, tensor
    if fresh:
        for name, tensor in checkpoint_names(mtp_tensors(model, config)).items():
            yield name, tensor.detach().clone()


def checkpoint_dtype(config: dict[str, Any]) -> torch.dtype:
    name = config.get("torch_dtype") or config.get("dtype") or "float32"
    dtype = getattr(torch, str(name), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32


def save_mtp_folder(
    model: CausalLM,
    config: dict[str, Any],
    model_dir: Path,
    out: Path,
    *,
    link_trunk: bool = True,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write `out` as a model folder with the trained MTP layer; returns mtp.safetensors."""
    if out.resolve() == model_dir.resolve():
        raise TrainingError(f"--out {out} is the model's own folder; choose another")
    out.mkdir(parents=True, exist_ok=True)
    dtype = checkpoint_dtype(config)
    head = {
        name: tensor.detach().to("cpu", dtype).contiguous()
        for name, tensor in checkpoint_names(mtp_tensors(model, config)).items()
    }
    head_file = out / MTP_FILE
    save_file(head, str(head_file), metadata={"format": "pt"})
    for shard in safetensors_files(model_dir):
        if shard.name == MTP_FILE:
            continue  # an older head of the source folder, replaced by this one
        target = out / shard.name
        target.unlink(missing_ok=True)
        if link_trunk:
            target.symlink_to(shard.resolve())
        else:
            shutil.copyfile(shard, target)
    if (model_dir / INDEX_FILE).is_file():
        index = json.loads((model_dir / INDEX_FILE).read_text())
        index["weight_map"] = {
            name: file for name, file in index["weight_map"].items() if file != MTP_FILE
        } | dict.fromkeys(head, MTP_FILE)
        (out / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    for path in model_dir.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name not in NOT_COPIED:
            shutil.copyfile(path, out / path.name)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if extra is not None:
        (out / "mtp-training.json").write_text(json.dumps(extra, indent=2) + "\n")
    return head_file
