"""Packed training rows, and the one way a batch of them runs through the engine's model code.

Training does not have a model of its own: it calls the serving engine's `CausalLM.forward`
with a `ForwardContext` in which every document of every row is its own sequence
(`ForwardContext.contiguous`). So attention never crosses a document boundary, positions
restart at each document (what the model sees when it serves that document alone), and the
weights trained are the weights served, computed by the same code, MoE kernels included.

A row is a fixed number of tokens, documents laid end to end; a document longer than what is
left of a row continues in the next row as a document of its own. The target of a token is
the next token of the same document, so a document's last token has none (`IGNORE`).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.models.base import CausalLM

IGNORE = -100
"""The target of a position with no next token in its document (cross-entropy skips it)."""


@dataclass(frozen=True)
class PackedRow:
    tokens: np.ndarray
    """[seq_len] int32 token ids."""

    doc_lengths: tuple[int, ...]
    """The row's documents (pieces of them at the row's ends), in order; they sum to
    len(tokens) and none is empty."""

    def __post_init__(self) -> None:
        if self.tokens.ndim != 1 or sum(self.doc_lengths) != len(self.tokens):
            raise ValueError(
                f"documents of {sum(self.doc_lengths)} tokens in a row of {self.tokens.shape}"
            )
        if any(length < 1 for length in self.doc_lengths):
            raise ValueError("a packed row holds an empty document")


@dataclass(frozen=True)
class Batch:
    input_ids: Tensor
    """[N] long: every row's tokens, rows one after the other."""

    targets: Tensor
    """[N] long: the next token in the same document, `IGNORE` at each document's end."""

    doc_lengths: tuple[int, ...]
    """Every document of the batch, in order (each row's documents, row after row)."""

    @classmethod
    def from_rows(cls, rows: Sequence[PackedRow], device: torch.device | None = None) -> "Batch":
        if not rows:
            raise ValueError("a batch needs at least one row")
        tokens = torch.from_numpy(np.concatenate([row.tokens for row in rows]).astype(np.int64))
        lengths = tuple(length for row in rows for length in row.doc_lengths)
        targets = torch.full_like(tokens, IGNORE)
        targets[:-1] = tokens[1:]
        ends = torch.cumsum(torch.tensor(lengths), 0) - 1
        targets[ends] = IGNORE
        return cls(tokens.to(device), targets.to(device), lengths)

    @property
    def num_targets(self) -> int:
        """Positions that have a next token: what a loss averages over."""
        return int((self.targets != IGNORE).sum())

    def context(self, *, capture_experts: bool = False) -> ForwardContext:
        """The whole batch as one forward, each document its own sequence."""
        ctx = ForwardContext.contiguous(list(self.doc_lengths), capture_experts=capture_experts)
        device = self.input_ids.device
        if device.type != "cpu":
            ctx.positions = ctx.positions.to(device)
            ctx.slot_mapping = ctx.slot_mapping.to(device)
            ctx.gather_indices = [g.to(device) for g in ctx.gather_indices]
        return ctx


def forward_hidden(model: CausalLM, batch: Batch, ctx: ForwardContext) -> Tensor:
    """[N, hidden] final hidden states of the batch, with autograd when grad is enabled.
    Each call gets a fresh scratch cache of exactly N slots: a cache written by a previous
    step's graph must not be written again in place (its old values are saved for backward)."""
    model.allocate_kv_cache(len(batch.input_ids))
    return model(batch.input_ids, ctx)


def next_token_loss(model: CausalLM, hidden: Tensor, batch: Batch) -> Tensor:
    """Mean cross-entropy of the LM head over the positions that have a next token."""
    return F.cross_entropy(model.compute_logits(hidden), batch.targets, ignore_index=IGNORE)
