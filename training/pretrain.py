"""Continued pretraining of a DeepSeek-V3-family model through the engine's own model code.

The loop reads top to bottom: load the starting folder (or the latest checkpoint), then for
each stage make sure the model has the stage's rope (a long stage rebuilds it from a config
with YaRN scaling, keeping weights and optimizer state), and for each step: forward with
every document its own sequence, next-token loss (plus an optional extra loss, e.g. MTP
self-distillation), backward, gradients summed over data-parallel ranks, clipping, AdamW at
the scheduled rate, then the aux-loss-free bias update from the step's expert loads. Held-out
loss every `val_every` steps; a checkpoint every `checkpoint_every` steps and at the end of
each stage; PNG plots of the metrics at the end (`out/plots/`).

A resumed run is the same run: the checkpoint holds the weights (expert biases included), the
optimizer's moments, the step (from which the learning rate and the data position follow) and
the RNG states, so the steps after a resume are bit-identical to those of an uninterrupted run.
"""

import ast
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import Tensor

from opencomposer.serving.engines.embedded.loader import build_model
from opencomposer.serving.engines.embedded.models.deepseek_v3 import DeepseekV3ForCausalLM
from opencomposer.training.batch import Batch, PackedRow, forward_hidden, next_token_loss
from opencomposer.training.checkpoint import (
    hf_weights,
    latest_checkpoint,
    load_checkpoint,
    load_trainable,
    save_checkpoint,
)
from opencomposer.training.data_source import RowSource, train_batches, val_batches
from opencomposer.training.distributed import DataParallel
from opencomposer.training.errors import TrainingError
from opencomposer.training.expert_balance import balance_step
from opencomposer.training.plots import plot_run
from opencomposer.training.schedule import Schedule
from opencomposer.training.train_log import METRICS, TrainLog

ExtraLoss = Callable[[DeepseekV3ForCausalLM, Batch, Tensor], Tensor]
"""(model, batch, final hidden states) -> a scalar loss averaged over the batch's target
positions (so that scaling it by a rank's share of the target tokens keeps data parallelism
exact), added to the next-token loss with `PretrainPlan.extra_weight`."""


@dataclass(frozen=True)
class Stage:
    name: str
    seq_len: int
    steps: int
    yarn_factor: float | None = None
    """YaRN rope scaling over the first stage's length (its original context); None keeps
    the starting model's rope."""


@dataclass(frozen=True)
class PretrainPlan:
    stages: tuple[Stage, ...]
    batch_rows: int = 8
    """Rows per step over all ranks together (the global batch)."""
    lr: float = 3e-3
    warmup: int = 10
    lr_floor: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    balance: bool = True
    """Aux-loss-free bias updates; off, the loads are still logged (the comparison run)."""
    balance_gamma: float = 1e-3
    autocast: bool = False
    """bf16 autocast. Off by default: on 2 CPU cores it did not pay (see the module's report
    in the CLI docstring); on CUDA turn it on."""
    extra_weight: float = 1.0
    val_every: int = 50
    val_rows: int = 16
    checkpoint_every: int = 0
    """Also checkpoint every this many steps (0: only at the end of each stage)."""

    def __post_init__(self) -> None:
        if not self.stages or any(s.steps < 1 or s.seq_len < 2 for s in self.stages):
            raise TrainingError("every stage needs at least one step of at least 2 tokens")
        if self.batch_rows < 1:
            raise TrainingError("--batch-rows must be at least 1")

    @property
    def total_steps(self) -> int:
        return sum(stage.steps for stage in self.stages)

    def tokens_before(self, step: int) -> int:
        """Tokens of the global batches of steps 0 .. step - 1."""
        tokens = 0
        for stage in self.stages:
            tokens += stage.seq_len * self.batch_rows * min(step, stage.steps)
            step = max(0, step - stage.steps)
        return tokens

    def stage_at(self, step: int) -> tuple[int, int]:
        """(stage index, step within that stage) of a global step."""
        for index, stage in enumerate(self.stages):
            if step < stage.steps:
                return index, step
            step -= stage.steps
        return len(self.stages), 0


def two_stage_plan(
    short_len: int, short_steps: int, long_len: int, long_steps: int, **settings: Any
) -> PretrainPlan:
    """The CPT recipe in miniature: most steps short, then a long stage with YaRN scaling by
    long_len / short_len over the short length."""
    stages = [Stage("short", short_len, short_steps)]
    if long_steps:
        stages.append(Stage("long", long_len, long_steps, yarn_factor=long_len / short_len))
    return PretrainPlan(stages=tuple(stages), **settings)


def with_yarn(config: dict[str, Any], factor: float, original: int) -> dict[str, Any]:
    """config.json with DeepSeek-V3's YaRN scaling (its released rope_scaling fields) over
    `original` positions; max_position_embeddings becomes the scaled context."""
    rope = {
        "type": "yarn",
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": original,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    }
    scaled = {**config, "max_position_embeddings": int(original * factor)}
    if config.get("rope_parameters"):  # transformers 5's layout keeps theta inside
        scaled["rope_parameters"] = {**rope, "rope_theta": config["rope_parameters"]["rope_theta"]}
    else:
        scaled["rope_scaling"] = rope
    return scaled


@dataclass
class Trainer:
    """The run's state: what a checkpoint saves and a resume restores."""

    plan: PretrainPlan
    model: DeepseekV3ForCausalLM
    config: dict[str, Any]
    dp: DataParallel
    files_from: tuple[Path, ...]
    """The folders whose tokenizer files every checkpoint copies, later ones winning: the
    starting model's, then the tokenizer the data was encoded with."""
    step: int = 0
    extra_loss: ExtraLoss | None = None
    schedule: Schedule = field(init=False)
    optimizer: torch.optim.AdamW = field(init=False)

    def __post_init__(self) -> None:
        total = self.plan.total_steps
        self.schedule = Schedule(
            self.plan.lr, min(self.plan.warmup, total), total, self.plan.lr_floor
        )
        self.optimizer = self._adamw()

    def _adamw(self) -> torch.optim.AdamW:
        """Weight decay on matrices (stacked experts included), none on norms."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        groups: list[dict[str, Any]] = [
            {"params": [p for p in params if p.ndim >= 2]},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(
            groups,
            lr=self.plan.lr,
            betas=self.plan.betas,
            weight_decay=self.plan.weight_decay,
            foreach=False,  # one code path on every device: same numbers after a resume
        )

    def use_config(self, config: dict[str, Any]) -> bool:
        """Rebuild the model from `config` (a stage's rope) with the same weights and
        optimizer state; False when the model already has it."""
        if config == self.config:
            return False
        moments = self.optimizer.state_dict()
        self.model = build_model(
            config, hf_weights(self.model).items(), device=self.dp.device
        ).train()  # type: ignore[assignment]
        self.config = config
        self.optimizer = self._adamw()
        self.optimizer.load_state_dict(moments)
        return True

    def train_step(self, rows: list[PackedRow]) -> dict[str, Any]:
        started = time.perf_counter()
        model, dp = self.model, self.dp
        batch = Batch.from_rows(rows, dp.device)
        global_targets = dp.sum(torch.tensor(float(batch.num_targets))).item()
        share = batch.num_targets / global_targets
        ctx = batch.context(capture_experts=True)
        with torch.autocast(dp.device.type, torch.bfloat16, enabled=self.plan.autocast):
            hidden = forward_hidden(model, batch, ctx)
            loss = next_token_loss(model, hidden, batch)
            extra = None if self.extra_loss is None else self.extra_loss(model, batch, hidden)
        total = loss if extra is None else loss + self.plan.extra_weight * extra
        (total * share).backward()
        dp.sum_gradients(model)
        params = [p for p in model.parameters() if p.grad is not None]
        clip = self.plan.grad_clip if self.plan.grad_clip > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, clip, foreach=False)
        lr = self.schedule.lr(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        # The scratch caches were written inside the graph; dropping them frees the step's
        # activations now instead of when the next step allocates its own.
        model.allocate_kv_cache(0)
        balance = balance_step(
            model,
            ctx.routed_experts,
            gamma=self.plan.balance_gamma,
            enabled=self.plan.balance,
            all_reduce=dp.sum,
        )
        entry: dict[str, Any] = {
            "loss": dp.sum(loss.detach().float() * share).item(),
            "lr": lr,
            "grad_norm": float(grad_norm),
            "expert_max_mean": balance,
        }
        if extra is not None:
            entry["extra_loss"] = dp.sum(extra.detach().float() * share).item()
        tokens = len(batch.input_ids) * dp.world_size
        entry["tokens_per_s"] = tokens / (time.perf_counter() - started)
        self.step += 1
        return entry

    @torch.no_grad()
    def held_out_loss(self, batches: list[list[PackedRow]]) -> float:
        """Token-weighted mean next-token loss over every rank's held-out rows."""
        sums = torch.zeros(2, dtype=torch.float64)
        for rows in batches:
            batch = Batch.from_rows(rows, self.dp.device)
            ctx = batch.context()
            with torch.autocast(self.dp.device.type, torch.bfloat16, enabled=self.plan.autocast):
                loss = next_token_loss(self.model, forward_hidden(self.model, batch, ctx), batch)
            sums += torch.tensor([loss.item() * batch.num_targets, batch.num_targets])
        total = self.dp.sum(sums)
        return float(total[0] / total[1])

    def state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "plan": json.dumps(asdict(self.plan)),
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python_rng": repr(random.getstate()),
        }

    def restore(self, state: dict[str, Any]) -> None:
        if state["plan"] != json.dumps(asdict(self.plan)):
            raise TrainingError(
                "the checkpoint was written by a run with other settings (stages, batch, "
                "schedule): resume with the same flags, or start a new --out"
            )
        self.step = int(state["step"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"]:
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        random.setstate(_literal_tuple(state["python_rng"]))


def pretrain(
    plan: PretrainPlan,
    init: Path,
    data: RowSource,
    out: Path,
    *,
    resume: bool = False,
    extra_loss: ExtraLoss | None = None,
    dp: DataParallel | None = None,
    stop_at: int | None = None,
    tokenizer: Path | None = None,
) -> Trainer:
    """Train `init` (a model folder) on `data` following `plan`, writing checkpoints and
    metrics into `out`; with `resume`, continue from `out`'s latest checkpoint. `stop_at`
    ends the run early after that global step (as if it were killed after a checkpoint).
    `tokenizer` is the folder of the tokenizer `data` was encoded with, when it is not the
    starting model's: the checkpoints carry it, so the engine decodes what was trained."""
    dp = dp or DataParallel()
    if plan.batch_rows % dp.world_size:
        raise TrainingError(f"--batch-rows {plan.batch_rows} is not a multiple of {dp.world_size}")
    trainer = _start(plan, init, out, resume, extra_loss, dp, tokenizer)
    last = min(plan.total_steps, stop_at if stop_at is not None else plan.total_steps)
    tokens = plan.tokens_before(trainer.step)
    with TrainLog(out if dp.is_main else None, plan.total_steps, first_step=trainer.step) as log:
        while trainer.step < last:
            index, in_stage = plan.stage_at(trainer.step)
            stage = plan.stages[index]
            if stage.yarn_factor is not None:
                config = with_yarn(trainer.config, stage.yarn_factor, plan.stages[0].seq_len)
                if trainer.use_config(config):
                    log.note(f"stage {stage.name}: rope rebuilt with YaRN x{stage.yarn_factor:g}")
            batches = train_batches(
                data,
                stage.seq_len,
                plan.batch_rows,
                first_step=in_stage,
                rank=dp.rank,
                world_size=dp.world_size,
            )
            val = (
                val_batches(
                    data,
                    stage.seq_len,
                    plan.val_rows,
                    plan.batch_rows,
                    rank=dp.rank,
                    world_size=dp.world_size,
                )
                if plan.val_every
                else []
            )
            stage_end = min(last, trainer.step + stage.steps - in_stage)
            while trainer.step < stage_end:
                step = trainer.step
                entry = trainer.train_step(next(batches))
                tokens += stage.seq_len * plan.batch_rows
                log.record({"step": step, "stage": stage.name, "tokens": tokens, **entry})
                finished = trainer.step == stage_end
                if plan.val_every and (trainer.step % plan.val_every == 0 or finished):
                    val_loss = trainer.held_out_loss(val)
                    log.record(
                        {"step": step, "stage": stage.name, "tokens": tokens, "val_loss": val_loss}
                    )
                every = plan.checkpoint_every
                if finished or (every and trainer.step % every == 0):
                    if dp.is_main:
                        folder = save_checkpoint(
                            out,
                            trainer.step,
                            trainer.model,
                            trainer.config,
                            trainer.files_from,
                            trainer.state(),
                        )
                        log.note(f"checkpoint {folder}")
                    dp.barrier()
    if dp.is_main:
        plot_run(out / METRICS, out / "plots")
    return trainer


def _start(
    plan: PretrainPlan,
    init: Path,
    out: Path,
    resume: bool,
    extra_loss: ExtraLoss | None,
    dp: DataParallel,
    tokenizer: Path | None,
) -> Trainer:
    folder = latest_checkpoint(out) if resume else None
    if resume and folder is None:
        raise TrainingError(f"--resume: {out} has no checkpoint (no {out / 'latest'})")
    if folder is None:
        if not (init / "config.json").is_file():
            raise TrainingError(f"{init}: no config.json (not a model folder)")
        model = load_trainable(init, dp.device)
        config = json.loads((init / "config.json").read_text())
        files_from: tuple[Path, ...] = (init,)
        if tokenizer is not None:
            _check_vocabulary(tokenizer, config)
            files_from = (init, tokenizer)
        return Trainer(plan, model, config, dp, files_from, extra_loss=extra_loss)
    model, config, state = load_checkpoint(folder, dp.device)
    trainer = Trainer(plan, model, config, dp, (folder,), extra_loss=extra_loss)
    trainer.restore(state)
    return trainer


def has_mtp_layers(folder: Path) -> bool:
    """Whether the model in `folder` (a starting folder or a checkpoint) has MTP layers."""
    file = folder / "config.json"
    return file.is_file() and bool(json.loads(file.read_text()).get("num_nextn_predict_layers"))


def _check_vocabulary(tokenizer_dir: Path, config: dict[str, Any]) -> None:
    """A tokenizer larger than the model's embedding would index past it mid-run."""
    file = tokenizer_dir / "tokenizer.json"
    if not file.is_file():
        raise TrainingError(f"{tokenizer_dir}: no tokenizer.json")
    size = Tokenizer.from_file(str(file)).get_vocab_size(with_added_tokens=True)
    if size > config["vocab_size"]:
        raise TrainingError(
            f"the tokenizer in {tokenizer_dir} has {size} tokens, the model's vocabulary "
            f"{config['vocab_size']}: train the tokenizer with --vocab-size {config['vocab_size']}"
        )


def _literal_tuple(text: str) -> tuple[Any, ...]:
    """`random.getstate()` back from its repr (the checkpoint loads with weights_only, which
    takes no Python tuples of this shape)."""
    value = ast.literal_eval(text)
    if not isinstance(value, tuple):
        raise TrainingError("the checkpoint's Python RNG state is not a tuple")
    return value
