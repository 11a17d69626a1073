"""`opencomposer models install`: trained weights into the store under a known name."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support.pretrain_fixtures import SyntheticRows, write_model

from opencomposer.serving import model_store
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.training.pretrain import PretrainPlan, Stage, pretrain

CLI = str(Path(sys.executable).parent / "opencomposer")


def models(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "models", *args, "-c", f"models_dir={store}"],
        capture_output=True, text=True, timeout=120, env=os.environ,
    )  # fmt: skip


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    plan = PretrainPlan(stages=(Stage("short", 32, 2),), batch_rows=2, val_every=0)
    pretrain(plan, write_model(tmp_path / "init"), SyntheticRows(), tmp_path / "run")
    return tmp_path / "run"


def test_a_pretraining_run_installs_as_tiny_moe_and_serves_by_name(
    tmp_path: Path, run_folder: Path
) -> None:
    store = tmp_path / "store"
    done = models(store, "install", "tiny-moe", str(run_folder))
    assert done.returncode == 0, done.stderr
    installed = model_store.model_dir(store, "tiny-moe")
    assert sorted(p.name for p in installed.iterdir()) == [
        "config.json",
        "model.safetensors",
        "opencomposer-model.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]  # fmt: skip  (no trainer state, no run logs)
    trained, served = load_model(run_folder / "checkpoint-2"), load_model(installed)
    for (name, a), (_, b) in zip(
        trained.named_parameters(), served.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name
    rows = {row["name"]: row for row in json.loads(models(store, "list", "--json").stdout)}
    assert rows["tiny-moe"]["installed"]
    assert rows["tiny-moe"]["source"] == (
        f"trained here (models install, from {(run_folder / 'checkpoint-2').resolve()})"
    )


def test_linked_shards_are_copied_so_the_store_stands_alone(
    tmp_path: Path, run_folder: Path
) -> None:
    linked = tmp_path / "linked"
    linked.mkdir()
    for file in (run_folder / "checkpoint-2").iterdir():
        (linked / file.name).symlink_to(file)
    store = tmp_path / "store"
    model_store.install_trained("tiny-moe", store, linked)
    shard = model_store.model_dir(store, "tiny-moe") / "model.safetensors"
    assert shard.is_file() and not shard.is_symlink()


@pytest.mark.parametrize("bad", ["unknown_name", "not_a_model"])
def test_bad_input_is_one_clear_line(tmp_path: Path, run_folder: Path, bad: str) -> None:
    store = tmp_path / "store"
    if bad == "unknown_name":
        done = models(store, "install", "gpt-9", str(run_folder))
        assert "unknown model 'gpt-9'" in done.stderr
    else:
        empty = tmp_path / "empty"
        empty.mkdir()
        done = models(store, "install", "tiny-moe", str(empty))
        assert f"{empty}: not a model folder" in done.stderr
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert not model_store.is_installed(store, "tiny-moe")
