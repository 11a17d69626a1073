"""Frozen-trunk MTP training end to end on a tiny Llama that ships no MTP layer: the head it
writes loads in the engine, drafts losslessly, and is accepted more often than the fresh one;
acceptance measured in training equals what the engine counts; DeepSeek-V3 gets a full MTP
decoder layer (MoE included) in its checkpoint layout."""

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from support.llama_mtp import llama_mtp_shapes, write_llama_checkpoint

from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.sequence import SamplingOptions
from opencomposer.serving.model_recipes.tiny_moe import (
    TINY_MOE_CONFIG,
    deepseek_v3_weight_shapes,
    init_weights,
)
from opencomposer.training import mtp_train
from opencomposer.training.batch import PackedRow
from opencomposer.training.errors import TrainingError
from opencomposer.training.mtp_accept import chained_acceptance, greedy_continuations, prompts_of
from opencomposer.training.mtp_train import MTPTrainConfig, MTPTrainResult, lr_factor, train_mtp

pytest.importorskip("transformers")
# The module's trained model (200 steps) is built by the first test that asks for it: about
# 10 s on an idle core, measured beyond the default 120 s on 2 cores shared by 4 jobs.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROMPT, TOKENS = 4, 32
CONFIG = MTPTrainConfig(
    steps=200, lr=3e-3, batch_rows=8, warmup=10, prompt_len=PROMPT, eval_tokens=TOKENS
)
# initializer_range 0.1: a trunk whose greedy output has structure an MTP layer can learn
# in 200 steps (measured: acceptance length 1.05 -> 1.5 / 1.7 / 1.85 at k = 1 / 2 / 3).
TRUNK = {"initializer_range": 0.1}


@dataclass
class Trained:
    source: Path
    out: Path
    result: MTPTrainResult
    eval_rows: list[PackedRow]


def greedy_rows(path: Path, count: int, seed: int) -> list[PackedRow]:
    """Rows of the model's own greedy text (random prompts): what its drafts must predict."""
    gen = np.random.default_rng(seed)
    prompts = [gen.integers(0, 128, PROMPT).tolist() for _ in range(count)]
    seqs = greedy_continuations(load_model(path), prompts, 40)
    return [PackedRow(np.array(s, dtype=np.int32), (len(s),)) for s in seqs]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    root = tmp_path_factory.mktemp("mtp-train")
    write_llama_checkpoint(root / "src", mtp=False, **TRUNK)
    rows = greedy_rows(root / "src", 24, seed=0)
    eval_rows = greedy_rows(root / "src", 6, seed=1)
    result = train_mtp(root / "src", rows, root / "out", eval_rows=eval_rows, config=CONFIG)
    return Trained(root / "src", root / "out", result, eval_rows)


def test_training_lowers_the_loss_and_raises_acceptance(trained: Trained) -> None:
    result = trained.result
    assert result.fresh and len(result.steps) == CONFIG.steps
    first = np.mean([s.loss for s in result.steps[:10]])
    last = np.mean([s.loss for s in result.steps[-10:]])
    assert last < first / 2
    assert result.eval_loss_after is not None and result.eval_loss_before is not None
    assert result.eval_loss_after < result.eval_loss_before / 2
    for k in (1, 2, 3):
        assert result.after[k].accept_length > result.before[k].accept_length + 0.2


def test_the_folder_holds_the_head_beside_the_linked_trunk(trained: Trained) -> None:
    out = trained.out
    config = json.loads((out / "config.json").read_text())
    assert config["num_nextn_predict_layers"] == 1
    assert (out / "model.safetensors").resolve() == (trained.source / "model.safetensors")
    with safe_open(out / "mtp.safetensors", framework="pt") as head:
        shapes = {name: tuple(head.get_slice(name).get_shape()) for name in head.keys()}  # noqa: SIM118
    assert shapes == llama_mtp_shapes(config)
    summary = json.loads((out / "mtp-training.json").read_text())
    assert summary["steps_run"] == CONFIG.steps and len(summary["losses"]) == CONFIG.steps
    assert summary["accept_length_after"]["1"] == round(trained.result.after[1].accept_length, 4)


def test_the_trained_head_drafts_losslessly_in_the_engine(trained: Trained) -> None:
    prompts = prompts_of(trained.eval_rows, PROMPT)
    options = SamplingOptions(max_tokens=TOKENS)
    plain = LLMEngine(load_model(trained.out, mtp=False)).generate(prompts, options)
    engine = LLMEngine(load_model(trained.out))
    drafted = engine.generate(prompts, SamplingOptions(max_tokens=TOKENS, draft_tokens=3))
    assert [s.output_ids for s in drafted] == [s.output_ids for s in plain]
    assert sum(s.spec.accepted for s in drafted) > 0


def test_acceptance_equals_what_the_engine_counts(trained: Trained) -> None:
    model = load_model(trained.out)
    measured = chained_acceptance(model, trained.eval_rows, 3, prompt_len=PROMPT, max_tokens=TOKENS)
    prompts = prompts_of(trained.eval_rows, PROMPT)
    for k in (1, 2, 3):
        seqs = LLMEngine(load_model(trained.out)).generate(
            prompts, SamplingOptions(max_tokens=TOKENS, draft_tokens=k)
        )
        counted = (
            sum(s.spec.verify_steps for s in seqs),
            sum(s.spec.drafted for s in seqs),
            sum(s.spec.accepted for s in seqs),
        )
        ours = measured[k]
        assert (ours.verify_steps, ours.drafted, ours.accepted) == counted
    assert measured[3].accepted > measured[1].accepted > 0  # chained drafts were accepted too


def test_a_draft_vocabulary_limits_the_drafts_only(trained: Trained) -> None:
    model = load_model(trained.out)
    args = {"prompt_len": PROMPT, "max_tokens": TOKENS}
    full = chained_acceptance(model, trained.eval_rows, 2, **args)
    everything = chained_acceptance(
        model, trained.eval_rows, 2, draft_vocab=torch.arange(128), **args
    )
    assert {k: s.accepted for k, s in everything.items()} == {
        k: s.accepted for k, s in full.items()
    }
    outputs = {
        t
        for ids in greedy_continuations(model, prompts_of(trained.eval_rows, PROMPT), TOKENS)
        for t in ids[PROMPT:]
    }
    never = torch.tensor(sorted(set(range(128)) - outputs))
    none = chained_acceptance(model, trained.eval_rows, 2, draft_vocab=never, **args)
    assert all(s.accepted == 0 for s in none.values())


def test_retraining_keeps_a_shipped_head(trained: Trained, tmp_path: Path) -> None:
    config = MTPTrainConfig(steps=1, lr=1e-9, batch_rows=2, warmup=1, prompt_len=PROMPT)
    again = train_mtp(
        trained.out,
        trained.eval_rows,
        tmp_path / "again",
        eval_rows=trained.eval_rows,
        config=config,
    )
    assert not again.fresh
    assert again.eval_loss_before == pytest.approx(trained.result.eval_loss_after, rel=1e-4)
    # The old head is not linked: the new one replaces it.
    assert sorted(p.name for p in (tmp_path / "again").glob("*.safetensors")) == [
        "model.safetensors",
        "mtp.safetensors",
    ]


def tiny_deepseek(path: Path, *, sharded: bool) -> dict[str, Any]:
    """A tiny-moe-shaped DeepSeek-V3 without MTP, optionally in two shards with an index."""
    config = TINY_MOE_CONFIG | {
        "vocab_size": 128,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "q_lora_rank": 32,
        "kv_lora_rank": 32,
        "n_routed_experts": 8,
        "num_nextn_predict_layers": 0,
        "torch_dtype": "bfloat16",
    }
    weights = init_weights(config, seed=0)
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    if not sharded:
        save_file(weights, str(path / "model.safetensors"))
        return config
    names = sorted(weights)
    halves = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    for file, part in halves.items():
        save_file({n: weights[n] for n in part}, str(path / file))
    index = {"weight_map": {n: f for f, part in halves.items() for n in part}}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    return config


@pytest.mark.parametrize("sharded", [False, True])
def test_deepseek_gets_a_full_mtp_decoder_layer(tmp_path: Path, sharded: bool) -> None:
    config = tiny_deepseek(tmp_path / "src", sharded=sharded)
    gen = np.random.default_rng(0)
    rows = [PackedRow(gen.integers(0, 128, 32).astype(np.int32), (32,)) for _ in range(2)]
    result = train_mtp(
        tmp_path / "src",
        rows,
        tmp_path / "out",
        config=MTPTrainConfig(steps=2, batch_rows=2, warmup=1),
    )
    head = load_file(result.head)
    mtp_config = config | {"num_nextn_predict_layers": 1}
    prefix = "model.layers.2."
    expected = {
        n: s for n, s in deepseek_v3_weight_shapes(mtp_config).items() if n.startswith(prefix)
    }
    assert {n: tuple(t.shape) for n, t in head.items()} == expected
    assert "model.layers.2.mlp.experts.7.down_proj.weight" in head
    assert {t.dtype for t in head.values()} == {torch.bfloat16}
    model = load_model(tmp_path / "out")
    assert model.num_mtp_layers == 1
    trained_bias = model.model.layers[2].mlp.gate.e_score_correction_bias  # type: ignore[union-attr,index]
    assert float(trained_bias.abs().sum()) == 0.0  # a buffer: initialised, never trained
    seqs = LLMEngine(model, EngineConfig(kv_cache_tokens=1024)).generate(
        [[1, 2, 3]], SamplingOptions(max_tokens=8, draft_tokens=2)
    )
    assert len(seqs[0].output_ids) == 8


def test_bad_input_is_a_training_error(trained: Trained, tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match="no training rows"):
        train_mtp(trained.source, [], tmp_path / "out")
    with pytest.raises(TrainingError, match="own folder"):
        train_mtp(
            trained.source,
            trained.eval_rows,
            trained.source,
            config=MTPTrainConfig(steps=1, warmup=1),
        )
    with pytest.raises(TrainingError, match=r"no config\.json"):
        train_mtp(tmp_path, trained.eval_rows, tmp_path / "out")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(TrainingError, match="unknown model_type"):
        train_mtp(tmp_path, trained.eval_rows, tmp_path / "out")


def test_the_schedule_warms_up_then_decays_to_its_floor() -> None:
    factors = [lr_factor(step, 10, 110, 0.1) for step in range(110)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] == pytest.approx(1.0) and factors[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(factors[9:]))


def test_kept_trunk_states_change_nothing_but_the_work(tmp_path: Path) -> None:
    """The trunk is frozen, so its states of a row, kept from the first epoch, are the ones a
    new forward would give: training with them takes the same steps as without."""
    write_llama_checkpoint(tmp_path / "src", mtp=False, **TRUNK)
    rows = greedy_rows(tmp_path / "src", 6, seed=3)
    losses = {}
    for cache_bytes in (0, 1 << 30):
        config = MTPTrainConfig(
            steps=8, lr=3e-3, batch_rows=2, warmup=2, cache_bytes=cache_bytes, chain_steps=2
        )
        result = train_mtp(tmp_path / "src", rows, tmp_path / str(cache_bytes), config=config)
        losses[cache_bytes] = [s.loss for s in result.steps]
    assert losses[0] == losses[1 << 30]


def test_trunk_states_are_computed_once_per_row(tmp_path: Path, monkeypatch) -> None:
    write_llama_checkpoint(tmp_path / "src", mtp=True, **TRUNK)
    rows = greedy_rows(tmp_path / "src", 4, seed=4)
    model = load_model(tmp_path / "src")
    forwards = []
    real = mtp_train._trunk
    monkeypatch.setattr(mtp_train, "_trunk", lambda *args: forwards.append(1) or real(*args))
    row_bytes = len(rows[0].tokens) * model.hidden_size * 4
    states = mtp_train.TrunkStates(model, MTPTrainConfig(cache_bytes=3 * row_bytes))
    first_batch, first = states.of(rows, [0, 1])
    again_batch, again = states.of(rows, [1, 0])
    assert len(forwards) == 1 and torch.equal(
        again_batch.input_ids[: len(rows[1].tokens)], first_batch.input_ids[len(rows[0].tokens) :]
    )
    torch.testing.assert_close(
        again, torch.cat([first[len(rows[0].tokens) :], first[: len(rows[0].tokens)]])
    )
    states.of(rows, [2, 3])  # only one of the two fits: both computed, one kept
    states.of(rows, [2, 3])
    assert len(forwards) == 3 and len(states.kept) == 3
