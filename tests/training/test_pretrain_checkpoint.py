"""Checkpoints that are not whole are refused with a one-line TrainingError."""

from collections.abc import Callable
from pathlib import Path

import pytest
from support.pretrain_fixtures import SyntheticRows, write_model

from opencomposer.training.errors import TrainingError
from opencomposer.training.pretrain import PretrainPlan, Stage, pretrain

PLAN = PretrainPlan(stages=(Stage("short", 32, 4),), batch_rows=2, val_every=0, checkpoint_every=2)


def truncate(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])


def flip_a_byte(folder: Path) -> None:
    state = folder / "trainer_state.pt"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF
    state.write_bytes(bytes(data))


def drop_manifest(folder: Path) -> None:
    (folder / "checkpoint.json").unlink()


def drop_config(folder: Path) -> None:
    (folder / "config.json").unlink()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (truncate, "model.safetensors does not match its hash"),
        (flip_a_byte, "trainer_state.pt does not match its hash"),
        (drop_manifest, "not a complete checkpoint"),
        (drop_config, "config.json is missing"),
    ],
)
def test_damaged_checkpoint_is_refused(
    tmp_path: Path, damage: Callable[[Path], None], message: str
) -> None:
    init = write_model(tmp_path / "init")
    pretrain(PLAN, init, SyntheticRows(), tmp_path / "out", stop_at=2)
    damage(tmp_path / "out" / "checkpoint-2")
    with pytest.raises(TrainingError, match=message):
        pretrain(PLAN, init, SyntheticRows(), tmp_path / "out", resume=True)


def test_resume_needs_a_checkpoint_and_the_same_plan(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    with pytest.raises(TrainingError, match="has no checkpoint"):
        pretrain(PLAN, init, SyntheticRows(), tmp_path / "out", resume=True)
    pretrain(PLAN, init, SyntheticRows(), tmp_path / "out", stop_at=2)
    other = PretrainPlan(stages=(Stage("short", 32, 4),), batch_rows=2, val_every=0, lr=1e-3)
    with pytest.raises(TrainingError, match="other settings"):
        pretrain(other, init, SyntheticRows(), tmp_path / "out", resume=True)
    (tmp_path / "out" / "latest").write_text("checkpoint-99\n")
    with pytest.raises(TrainingError, match="checkpoint-99, which does not exist"):
        pretrain(PLAN, init, SyntheticRows(), tmp_path / "out", resume=True)


def test_a_failed_write_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    init = write_model(tmp_path / "init")
    pretrain(PLAN, init, SyntheticRows(), tmp_path / "out", stop_at=2)
    import opencomposer.training.checkpoint as checkpoint

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(OSError, match="No space"):
        pretrain(PLAN, init, SyntheticRows(), tmp_path / "out", resume=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if "checkpoint" in p.name) == [
        "checkpoint-2"
    ]
    assert (tmp_path / "out" / "latest").read_text() == "checkpoint-2\n"
