"""The pretraining loop on a small DeepSeek-V3 (tiny-moe's architecture) and synthetic rows."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from support.pretrain_fixtures import SMALL_CONFIG, SyntheticRows, write_model

from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.models.deepseek_v3 import DeepseekV3ForCausalLM
from opencomposer.serving.engines.embedded.models.mla import rope_setup
from opencomposer.serving.model_recipes.tiny_moe import deepseek_v3_weight_shapes
from opencomposer.training.batch import Batch, forward_hidden
from opencomposer.training.expert_balance import routers
from opencomposer.training.mtp_distill import mtp_distillation_loss
from opencomposer.training.pretrain import PretrainPlan, Stage, pretrain, two_stage_plan
from opencomposer.training.train_log import read_metrics


def losses(out: Path, key: str = "loss") -> list[float]:
    return [e[key] for e in read_metrics(out / "metrics.jsonl") if key in e]


def test_loss_falls_and_everything_is_recorded(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    plan = PretrainPlan(stages=(Stage("short", 32, 24),), batch_rows=4, warmup=3, val_every=8)
    pretrain(plan, init, SyntheticRows(), tmp_path / "out")
    entries = read_metrics(tmp_path / "out" / "metrics.jsonl")
    train = [e for e in entries if "loss" in e]
    assert [e["step"] for e in train] == list(range(24))
    assert [e["tokens"] for e in train] == [32 * 4 * (i + 1) for i in range(24)]
    assert set(train[0]) == {
        "step", "stage", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "expert_max_mean",
    }  # fmt: skip
    assert len(train[0]["expert_max_mean"]) == 2  # the two MoE layers of the main model
    assert sum(e["loss"] for e in train[-4:]) / 4 < sum(e["loss"] for e in train[:4]) / 4 - 0.8
    val = losses(tmp_path / "out", "val_loss")
    assert len(val) == 3 and val[-1] < val[0] - 0.5
    assert sorted(p.name for p in (tmp_path / "out" / "plots").iterdir()) == [
        "expert_balance.png",
        "loss.png",
        "throughput.png",
    ]


def test_checkpoint_is_the_engine_layout_and_loads_as_trained(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    plan = PretrainPlan(stages=(Stage("short", 32, 3),), batch_rows=2, val_every=0)
    trainer = pretrain(plan, init, SyntheticRows(), tmp_path / "out")
    folder = tmp_path / "out" / "checkpoint-3"
    assert (tmp_path / "out" / "latest").read_text() == "checkpoint-3\n"
    config = json.loads((folder / "config.json").read_text())
    assert config == SMALL_CONFIG
    tensors = load_file(folder / "model.safetensors")
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    assert shapes == deepseek_v3_weight_shapes(config)
    assert (folder / "tokenizer.json").read_text() == (init / "tokenizer.json").read_text()
    assert (folder / "tokenizer_config.json").is_file()
    served = load_model(folder)
    trained = trainer.model.state_dict()
    for name, tensor in served.state_dict().items():
        assert torch.equal(tensor, trained[name]), name
    # the biases moved (balancing is on) and were saved with the weights
    assert any(r.e_score_correction_bias.abs().sum() > 0 for r in routers(trainer.model))


def test_resume_is_bit_identical(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    plan = two_stage_plan(32, 4, 64, 4, batch_rows=4, warmup=2, val_every=2, checkpoint_every=3)
    data = SyntheticRows(rows=12)  # an epoch is 3 steps: the resumed run wraps epochs too
    straight = pretrain(plan, init, data, tmp_path / "a")
    pretrain(plan, init, data, tmp_path / "b", stop_at=6)
    assert (tmp_path / "b" / "latest").read_text() == "checkpoint-6\n"
    resumed = pretrain(plan, init, data, tmp_path / "b", resume=True)
    for (name, a), (_, b) in zip(
        straight.model.state_dict().items(), resumed.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert read_metrics(tmp_path / "a" / "metrics.jsonl") != []
    for key in ("loss", "val_loss", "grad_norm", "lr"):
        assert losses(tmp_path / "a", key) == losses(tmp_path / "b", key), key


def test_long_stage_serves_with_its_yarn_rope(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    plan = two_stage_plan(32, 2, 128, 2, batch_rows=2, val_every=0)
    trainer = pretrain(plan, init, SyntheticRows(), tmp_path / "out")
    config = json.loads((tmp_path / "out" / "checkpoint-4" / "config.json").read_text())
    assert config["rope_scaling"]["factor"] == 4
    assert config["rope_scaling"]["original_max_position_embeddings"] == 32
    assert config["max_position_embeddings"] == 128
    short = json.loads((tmp_path / "out" / "checkpoint-2" / "config.json").read_text())
    assert short["rope_scaling"] is None
    served = load_model(tmp_path / "out" / "checkpoint-4")
    assert isinstance(served, DeepseekV3ForCausalLM)
    inv_freq, factor, _ = rope_setup(8, served.config.rope, 24)
    assert torch.equal(served.model.rotary_emb.inv_freq, inv_freq)
    assert torch.equal(trainer.model.model.rotary_emb.inv_freq, inv_freq)
    assert served.model.attention_factor == factor
    batch = Batch.from_rows([SyntheticRows().row("val", 128, 0)])
    with torch.no_grad():
        expected = trainer.model.compute_logits(
            forward_hidden(trainer.model, batch, batch.context())
        )
        got = served.compute_logits(forward_hidden(served, batch, batch.context()))
    assert torch.equal(got, expected)


def test_stage_switch_keeps_weights_and_optimizer_state(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    plan = two_stage_plan(32, 2, 64, 1, batch_rows=2, val_every=0)
    trainer = pretrain(plan, init, SyntheticRows(), tmp_path / "out", stop_at=2)
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    moments = [s["exp_avg"].clone() for s in trainer.optimizer.state.values()]
    from opencomposer.training.pretrain import with_yarn

    assert trainer.use_config(with_yarn(trainer.config, 2.0, 32))
    for name, param in trainer.model.named_parameters():
        assert torch.equal(param, weights[name]), name
    after = [s["exp_avg"] for s in trainer.optimizer.state.values()]
    assert len(after) == len(moments) and all(map(torch.equal, after, moments))
    assert trainer.model.config.rope["rope_type"] == "yarn"
    assert not trainer.use_config(with_yarn(trainer.config, 2.0, 32))


def test_extra_loss_is_trained(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    plan = PretrainPlan(stages=(Stage("short", 32, 12),), batch_rows=2, val_every=0, extra_weight=5)

    def hidden_scale(
        model: DeepseekV3ForCausalLM, batch: Batch, hidden: torch.Tensor
    ) -> torch.Tensor:
        return model.model.norm.weight.pow(2).mean()

    pretrain(plan, init, SyntheticRows(), tmp_path / "out", extra_loss=hidden_scale)
    extra = losses(tmp_path / "out", "extra_loss")
    assert len(extra) == 12 and extra[-1] < extra[0] - 0.01


def test_mtp_layer_trains_jointly_by_self_distillation(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    plan = PretrainPlan(stages=(Stage("short", 32, 16),), batch_rows=4, val_every=0, warmup=2)
    trainer = pretrain(
        plan, init, SyntheticRows(), tmp_path / "out", extra_loss=mtp_distillation_loss
    )
    assert len(losses(tmp_path / "out", "extra_loss")) == 16
    # The trained MTP layer drafts the trained trunk better than the layer it started from.
    model = load_model(tmp_path / "out" / "checkpoint-16")
    batch = Batch.from_rows([SyntheticRows().row("val", 32, i) for i in range(4)])
    with torch.no_grad():
        trained = mtp_distillation_loss(model, batch, forward_hidden(model, batch, batch.context()))
        start = load_file(init / "model.safetensors")
        for name, param in model.named_parameters():
            if name.startswith("model.layers.3.") and name in start:
                param.copy_(start[name])
        untrained = mtp_distillation_loss(
            model, batch, forward_hidden(model, batch, batch.context())
        )
    assert trained < untrained * 0.7
    assert trainer.step == 16


def _tokenizer_folder(folder: Path, vocab: int) -> Path:
    from tokenizers import Tokenizer, models

    folder.mkdir(parents=True)
    words = {f"w{i}": i for i in range(vocab - 1)} | {"[UNK]": vocab - 1}
    Tokenizer(models.WordLevel(words, unk_token="[UNK]")).save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text('{"bos_token": "w0"}')
    return folder


def test_checkpoints_carry_the_tokenizer_the_data_was_encoded_with(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    data_tokenizer = _tokenizer_folder(tmp_path / "data-tokenizer", 60)
    plan = PretrainPlan(stages=(Stage("short", 32, 1),), batch_rows=2, val_every=0)
    pretrain(plan, init, SyntheticRows(), tmp_path / "out", tokenizer=data_tokenizer)
    folder = tmp_path / "out" / "checkpoint-1"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (folder / name).read_bytes() == (data_tokenizer / name).read_bytes()
    # a resumed run carries it on from the checkpoint
    longer = PretrainPlan(stages=(Stage("short", 32, 1), Stage("more", 32, 1)), batch_rows=2)
    pretrain(longer, init, SyntheticRows(), tmp_path / "out2", tokenizer=data_tokenizer, stop_at=1)
    pretrain(longer, init, SyntheticRows(), tmp_path / "out2", resume=True)
    resumed = tmp_path / "out2" / "checkpoint-2" / "tokenizer.json"
    assert resumed.read_bytes() == (data_tokenizer / "tokenizer.json").read_bytes()


def test_a_tokenizer_larger_than_the_model_vocabulary_is_refused(tmp_path: Path) -> None:
    from opencomposer.training.errors import TrainingError

    init = write_model(tmp_path / "init")
    too_big = _tokenizer_folder(tmp_path / "big", SMALL_CONFIG["vocab_size"] + 1)
    plan = PretrainPlan(stages=(Stage("short", 32, 1),), batch_rows=2, val_every=0)
    with pytest.raises(TrainingError, match="--vocab-size"):
        pretrain(plan, init, SyntheticRows(), tmp_path / "out", tokenizer=too_big)
    assert not (tmp_path / "out" / "latest").exists()


def test_balancing_moves_biases_against_load_and_can_be_switched_off(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    stages = (Stage("short", 32, 3),)
    off = pretrain(
        PretrainPlan(stages=stages, batch_rows=2, val_every=0, balance=False),
        init, SyntheticRows(), tmp_path / "off",
    )  # fmt: skip
    assert all(torch.equal(r.e_score_correction_bias, torch.zeros(8)) for r in routers(off.model))
    on = pretrain(
        PretrainPlan(stages=stages, batch_rows=2, val_every=0, balance_gamma=0.01),
        init, SyntheticRows(), tmp_path / "on",
    )  # fmt: skip
    for router in routers(on.model)[:2]:  # the MTP layer's router saw no tokens
        bias = router.e_score_correction_bias
        assert bias.abs().max() > 0 and torch.all((bias * 100).round() % 1 == 0)
    assert routers(on.model)[2].e_score_correction_bias.abs().sum() == 0


@pytest.mark.parametrize("bad", ["no_config", "empty_data", "tiny_data"])
def test_bad_input_is_a_training_error(tmp_path: Path, bad: str) -> None:
    from opencomposer.training.errors import TrainingError

    init = write_model(tmp_path / "init")
    data = SyntheticRows()
    if bad == "no_config":
        (init / "config.json").unlink()
    elif bad == "empty_data":
        data = SyntheticRows(val_rows=0)
    else:
        data = SyntheticRows(rows=3)
    plan = PretrainPlan(stages=(Stage("short", 32, 2),), batch_rows=4, val_every=1)
    with pytest.raises(TrainingError):
        pretrain(plan, init, data, tmp_path / "out")
