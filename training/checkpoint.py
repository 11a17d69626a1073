"""Checkpoints the engine serves and a resumed run continues from, bit for bit.

`out/checkpoint-{step}/` holds what a Hugging Face DeepSeek-V3 folder holds: config.json (with
the stage's rope scaling, so the engine builds the rotary frequencies the weights were trained
with), model.safetensors in the released models' layout (one tensor per expert projection;
the MTP layer without copies of the embedding and LM head) and the tokenizer files of the
folder training started from. Beside them, `trainer_state.pt` (optimizer, step, data
position, RNG states) and `checkpoint.json`, the SHA-256 of every file.

A checkpoint is written into a hidden temporary folder and renamed into place only when
complete, then `out/latest` (the folder's name) is replaced atomically; so a killed run leaves
either the previous checkpoint or the new one, never half of one. Loading checks the hashes:
a truncated or edited file is a `TrainingError`, not a model with garbage weights.
"""

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from opencomposer.serving.engines.embedded.loader import ModelLoadError, load_model
from opencomposer.serving.engines.embedded.models.deepseek_v3 import (
    DeepseekV3ForCausalLM,
    Experts,
)
from opencomposer.training.errors import TrainingError

MANIFEST = "checkpoint.json"
TRAINER_STATE = "trainer_state.pt"
LATEST = "latest"
TOKENIZER_FILES = (
    "tokenizer*",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template*",
    "generation_config.json",
)
"""What is copied from the starting folder: the tokenizer, its chat template, generation
defaults. Not its weights, config or manifests."""


def hf_weights(model: DeepseekV3ForCausalLM) -> dict[str, Tensor]:
    """The model's tensors under the checkpoint names `load_model` reads: stacked experts
    split into `experts.{e}.{gate,up,down}_proj.weight`. The rotary caches are
    non-persistent buffers (rebuilt from config.json), and the MTP layer holds no copy of
    the embedding or head, so neither is written."""
    experts = {name: m for name, m in model.named_modules() if isinstance(m, Experts)}
    out: dict[str, Tensor] = {}
    for name, tensor in model.state_dict().items():
        owner, _, leaf = name.rpartition(".")
        if owner in experts:
            for e, piece in enumerate(tensor):
                out[f"{owner}.{e}.{leaf}.weight"] = piece.detach().clone().contiguous()
        else:
            out[name] = tensor.detach().clone().contiguous()
    return out


def save_checkpoint(
    out: Path,
    step: int,
    model: DeepseekV3ForCausalLM,
    config: dict[str, Any],
    tokenizer_from: tuple[Path, ...],
    trainer_state: dict[str, Any],
) -> Path:
    """Write `out/checkpoint-{step}` whole, then point `out/latest` at it; returns the folder."""
    final = out / f"checkpoint-{step}"
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".checkpoint-{step}-", dir=out))
    try:
        save_file(hf_weights(model), str(scratch / "model.safetensors"), metadata={"format": "pt"})
        (scratch / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        for source in tokenizer_from:  # later folders overwrite earlier ones' files
            for pattern in TOKENIZER_FILES:
                for file in sorted(source.glob(pattern)):
                    if file.is_file():
                        shutil.copyfile(file, scratch / file.name)
        torch.save(trainer_state, scratch / TRAINER_STATE)
        files = {f.name: _sha256(f) for f in sorted(scratch.iterdir())}
        (scratch / MANIFEST).write_text(json.dumps({"step": step, "files": files}, indent=2))
        if final.exists():  # a rerun of the same step (after a resume): replace it whole
            shutil.rmtree(final)
        scratch.rename(final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    _write_atomically(out / LATEST, final.name + "\n")
    return final


def latest_checkpoint(out: Path) -> Path | None:
    """The folder `out/latest` names; None when the run has written no checkpoint yet."""
    pointer = out / LATEST
    if not pointer.is_file():
        return None
    folder = out / pointer.read_text().strip()
    if not folder.is_dir():
        raise TrainingError(f"{pointer} names {folder.name}, which does not exist")
    return folder


def load_checkpoint(
    folder: Path, device: torch.device
) -> tuple[DeepseekV3ForCausalLM, dict[str, Any], dict[str, Any]]:
    """(model in train mode, config.json, trainer state) of a verified checkpoint folder."""
    verify(folder)
    config = json.loads((folder / "config.json").read_text())
    model = load_trainable(folder, device)
    state = torch.load(folder / TRAINER_STATE, map_location="cpu", weights_only=True)
    return model, config, state


def load_trainable(folder: Path, device: torch.device) -> DeepseekV3ForCausalLM:
    """A DeepSeek-V3-family model folder (the engine's loader) in float32, in train mode."""
    try:
        model = load_model(folder, device=device)
    except ModelLoadError as error:
        raise TrainingError(str(error)) from error
    if not isinstance(model, DeepseekV3ForCausalLM):
        raise TrainingError(f"{folder}: pretraining takes the deepseek_v3 family only")
    return model.train()


def verify(folder: Path) -> None:
    """Every file the manifest lists is there with its hash; raises TrainingError if not."""
    manifest = folder / MANIFEST
    try:
        files = json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TrainingError(f"{folder}: not a complete checkpoint ({MANIFEST}: {error})") from error
    for name in ("config.json", "model.safetensors", TRAINER_STATE):
        if name not in files:
            raise TrainingError(f"{folder}: {MANIFEST} lists no {name}")
    for name, digest in files.items():
        file = folder / name
        if not file.is_file():
            raise TrainingError(f"{folder}: {name} is missing (incomplete checkpoint)")
        if _sha256(file) != digest:
            raise TrainingError(f"{folder}: {name} does not match its hash (corrupt checkpoint)")


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(text)
    os.replace(scratch, path)
