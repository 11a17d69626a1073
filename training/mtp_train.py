"""Frozen-trunk MTP self-distillation: the report's way to give a checkpoint that ships no MTP
layer (Kimi K2.5, SmolLM2) a draft head, and to retrain one that does.

The trunk runs under no_grad and nothing of it is trained (the shared embedding and LM head
included); only the MTP layer learns, by AdamW with linear warmup then cosine decay and
gradient clipping, on `mtp_distillation_loss`. Held-out acceptance is measured before and
after as the engine runs drafts (`chained_acceptance`), and the head is written beside links
to the trunk's shards (`save_mtp_folder`), a folder the engine serves with MTP on.

CPU:      opencomposer train mtp --model smollm2-135m --data DIR --out DIR --steps 200
One GPU:  opencomposer train mtp --model DIR --data DIR --out DIR --device cuda --batch-rows 32
"""

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.sequence import SpecStats
from opencomposer.training.batch import Batch, PackedRow, forward_hidden
from opencomposer.training.draft_vocab import coverage, frequent_tokens, write_draft_vocab
from opencomposer.training.errors import TrainingError
from opencomposer.training.mtp_accept import chained_acceptance
from opencomposer.training.mtp_distill import mtp_distillation_loss
from opencomposer.training.mtp_head import load_with_mtp, mtp_tensors, save_mtp_folder


@dataclass(frozen=True)
class MTPTrainConfig:
    steps: int = 200
    lr: float = 1e-3
    batch_rows: int = 4
    warmup: int = 20
    min_lr_ratio: float = 0.1
    """The cosine ends at lr * min_lr_ratio."""
    clip: float = 1.0
    weight_decay: float = 0.0
    seed: int = 0
    k_max: int = 3
    prompt_len: int = 32
    """Held-out prompt tokens for acceptance; the model then decodes `eval_tokens`."""
    eval_tokens: int = 64
    device: str = "cpu"
    link_trunk: bool = True
    max_seconds: float | None = None
    """Stop training after this much time (the schedule stays laid out for `steps`): for
    shared machines; what ran is recorded."""
    draft_vocab: int = 0
    """Train the drafts for a reduced draft vocabulary of this many of the training rows'
    most frequent tokens (FR-Spec), written beside the head; 0, or at least the model's
    vocabulary: drafts over the whole vocabulary."""
    chain_steps: int = 3
    """Draft steps trained as the engine chains them (`mtp_distillation_loss`'s `steps`);
    1 trains the first draft only."""
    autocast: bool = False
    """bf16 autocast for the trunk's forward and the loss (CPUs with AMX, GPUs)."""
    cache_bytes: int = 4 << 30
    """Memory for the trunk's hidden states of the training rows (`TrunkStates`)."""


@dataclass(frozen=True)
class StepLog:
    step: int
    loss: float
    lr: float
    grad_norm: float
    tokens: int
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


@dataclass
class MTPTrainResult:
    head: Path
    fresh: bool
    """The checkpoint had no MTP layer: it was initialised here."""
    steps: list[StepLog] = field(default_factory=list)
    eval_loss_before: float | None = None
    eval_loss_after: float | None = None
    before: dict[int, SpecStats] = field(default_factory=dict)
    after: dict[int, SpecStats] = field(default_factory=dict)
    draft_vocab: Path | None = None
    draft_vocab_coverage: float | None = None
    """The fraction of held-out tokens inside the draft vocabulary (acceptance before and
    after is measured drafting from it, as the engine will)."""


def lr_factor(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup from lr / warmup, then cosine to lr * min_ratio at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup - 1)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


class BatchStream:
    """Rows in a seeded shuffled order, epoch after epoch, `batch_rows` at a time."""

    def __init__(self, rows: Sequence[PackedRow], batch_rows: int, seed: int) -> None:
        self.rows, self.batch_rows, self.random = rows, batch_rows, random.Random(seed)
        self.order: list[int] = []

    def next(self) -> list[int]:
        """The indices of the next batch's rows."""
        while len(self.order) < self.batch_rows:
            epoch = list(range(len(self.rows)))
            self.random.shuffle(epoch)
            self.order += epoch
        taken, self.order = self.order[: self.batch_rows], self.order[self.batch_rows :]
        return taken


class TrunkStates:
    """The frozen trunk's final hidden states of each training row, computed on first use and
    kept while they fit in `limit_bytes`: the trunk never changes, so the states of a row are
    the same every epoch, and its forward is most of a step's work (SmolLM2 on 2 CPU cores:
    about two thirds of a step of 8 x 512 tokens, chained over 3 steps)."""

    def __init__(self, model: CausalLM, config: MTPTrainConfig) -> None:
        self.model, self.config = model, config
        self.kept: dict[int, Tensor] = {}
        self.bytes = 0

    def of(self, rows: Sequence[PackedRow], indices: list[int]) -> tuple[Batch, Tensor]:
        """The batch of `rows[i]` for i in `indices`, and its hidden states."""
        batch = Batch.from_rows([rows[i] for i in indices], _device(self.model))
        if all(i in self.kept for i in indices):
            return batch, torch.cat([self.kept[i] for i in indices])
        hidden = _trunk(self.model, batch, self.config)
        start = 0
        for i in indices:
            length = len(rows[i].tokens)
            piece = hidden[start : start + length]
            start += length
            size = piece.numel() * piece.element_size()
            if i not in self.kept and self.bytes + size <= self.config.cache_bytes:
                self.kept[i] = piece.clone()
                self.bytes += size
        return batch, hidden


@torch.no_grad()
def eval_loss(
    model: CausalLM, rows: Sequence[PackedRow], config: MTPTrainConfig, vocab: Tensor | None
) -> float:
    """Mean distillation loss over held-out rows (each batch weighed by its pairs alike)."""
    losses = []
    for start in range(0, len(rows), config.batch_rows):
        batch = Batch.from_rows(rows[start : start + config.batch_rows], _device(model))
        losses.append(float(_loss(model, batch, config, vocab)))
    return sum(losses) / len(losses)


def _loss(
    model: CausalLM,
    batch: Batch,
    config: MTPTrainConfig,
    vocab: Tensor | None,
    hidden: Tensor | None = None,
) -> Tensor:
    """The distillation loss of one batch (its trunk states computed unless given)."""
    if hidden is None:
        hidden = _trunk(model, batch, config)
    with torch.autocast(_device(model).type, torch.bfloat16, enabled=config.autocast):
        return mtp_distillation_loss(model, batch, hidden, steps=config.chain_steps, vocab=vocab)


@torch.no_grad()
def _trunk(model: CausalLM, batch: Batch, config: MTPTrainConfig) -> Tensor:
    with torch.autocast(_device(model).type, torch.bfloat16, enabled=config.autocast):
        return forward_hidden(model, batch, batch.context())


def _device(model: CausalLM) -> torch.device:
    return next(model.parameters()).device


def freeze_trunk(model: CausalLM, trained: list[nn.Parameter]) -> None:
    ids = {id(p) for p in trained}
    for param in model.parameters():
        param.requires_grad_(id(param) in ids)


def train_mtp(
    model_dir: Path,
    rows: Sequence[PackedRow],
    out: Path,
    *,
    eval_rows: Sequence[PackedRow] = (),
    config: MTPTrainConfig = MTPTrainConfig(),
    on_step: Callable[[StepLog], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> MTPTrainResult:
    """Train `model_dir`'s MTP layer (fresh when it has none) on `rows` with the trunk
    frozen, and write `out`; `on_step` sees every step, `on_phase` each phase's name."""
    if not rows:
        raise TrainingError("no training rows (an empty corpus?)")
    if config.steps < 1 or config.lr <= 0 or config.batch_rows < 1 or config.chain_steps < 1:
        raise TrainingError("steps, lr, batch rows and chained steps must be positive")
    phase = on_phase or (lambda _: None)
    torch.manual_seed(config.seed)
    model, model_config, fresh = load_with_mtp(model_dir, device=config.device, seed=config.seed)
    params = [p for p in mtp_tensors(model, model_config).values() if isinstance(p, nn.Parameter)]
    freeze_trunk(model, params)
    result = MTPTrainResult(head=out, fresh=fresh)
    device = _device(model)
    reduced = None
    if 0 < config.draft_vocab < model.vocab_size:
        reduced = frequent_tokens(rows, model.vocab_size, config.draft_vocab)
        if eval_rows:
            result.draft_vocab_coverage = coverage(eval_rows, reduced)
    vocab = reduced.to(device) if reduced is not None else None
    if eval_rows:
        phase("held-out acceptance before training")
        result.eval_loss_before = eval_loss(model, eval_rows, config, vocab)
        result.before = _acceptance(model, eval_rows, config, vocab)
    optimizer = torch.optim.AdamW(
        params, lr=config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: lr_factor(step, config.warmup, config.steps, config.min_lr_ratio),
    )
    stream = BatchStream(rows, config.batch_rows, config.seed)
    states = TrunkStates(model, config)
    phase("training")
    training_started = time.perf_counter()
    for step in range(config.steps):
        if config.max_seconds is not None and (
            time.perf_counter() - training_started > config.max_seconds
        ):
            break
        started = time.perf_counter()
        batch, hidden = states.of(rows, stream.next())
        loss = _loss(model, batch, config, vocab, hidden)
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(params, config.clip))
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - started
        log = StepLog(step, float(loss.detach()), lr, norm, len(batch.input_ids), seconds)
        result.steps.append(log)
        if on_step is not None:
            on_step(log)
    if eval_rows:
        phase("held-out acceptance after training")
        result.eval_loss_after = eval_loss(model, eval_rows, config, vocab)
        result.after = _acceptance(model, eval_rows, config, vocab)
    phase("writing the model folder")
    result.head = save_mtp_folder(
        model,
        model_config,
        model_dir,
        out,
        link_trunk=config.link_trunk,
        extra=_summary(model_dir, config, result),
    )
    if reduced is not None:
        result.draft_vocab = write_draft_vocab(out, reduced)
    return result


def _acceptance(
    model: CausalLM,
    rows: Sequence[PackedRow],
    config: MTPTrainConfig,
    draft_vocab: torch.Tensor | None = None,
) -> dict[int, SpecStats]:
    return chained_acceptance(
        model,
        rows,
        config.k_max,
        prompt_len=config.prompt_len,
        max_tokens=config.eval_tokens,
        draft_vocab=draft_vocab,
    )


def _summary(model_dir: Path, config: MTPTrainConfig, result: MTPTrainResult) -> dict[str, object]:
    """What mtp-training.json records: where the head came from and what it measured."""

    def lengths(stats: dict[int, SpecStats]) -> dict[str, float]:
        return {str(k): round(s.accept_length, 4) for k, s in stats.items()}

    tail = result.steps[-10:]
    tokens, seconds = sum(s.tokens for s in result.steps), sum(s.seconds for s in result.steps)
    return {
        "source": str(model_dir.resolve()),
        "fresh_mtp_layer": result.fresh,
        "config": config.__dict__,
        "steps_run": len(result.steps),
        "final_loss": sum(s.loss for s in tail) / len(tail),
        "losses": [round(s.loss, 5) for s in result.steps],
        "training_tokens": tokens,
        "tokens_per_second": tokens / seconds,
        "eval_loss_before": result.eval_loss_before,
        "eval_loss_after": result.eval_loss_after,
        "accept_length_before": lengths(result.before),
        "accept_length_after": lengths(result.after),
        "draft_vocab_coverage": result.draft_vocab_coverage,
    }
