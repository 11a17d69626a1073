"""MTP self-distillation: the MTP layer learns the main model's own next-next-token distribution.

The MTP layer reads the main model's final hidden state at position i and the token at i + 1
and predicts token i + 2 — the token the main head predicts at position i + 1. So the teacher
is the main head's full distribution there (detached), not the one-hot data token, and the
loss is KL(teacher || student) per pair: a draft that matches the model being served is
what acceptance rewards, whatever the data says.

Pairs are formed per document exactly as the engine forms them (`speculative.MTPProposer`:
hidden i with token i + 1 at MTP position i, its own causal cache per document). A document
of L tokens has L - 1 pairs, but the last one has no teacher inside the document (position
L - 1 predicts a token that is not there); being causally last, it changes no other pair,
so it is not run at all: MTP positions 0 .. L - 3 and their teachers at 1 .. L - 2.

The vocabulary-wide part (two LM-head products and their log-softmax over 49,152 tokens for
SmolLM2) runs in chunks of rows under activation checkpointing, so memory holds one chunk's
logits at a time, in the forward and in the backward; a batch that fits one chunk skips the
recompute (measured on SmolLM2, 1,020 pairs: 5.7 s of loss and backward with 512-row chunks).
"""

from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.training.batch import Batch
from opencomposer.training.errors import TrainingError

CHUNK_ROWS = 512
"""Rows of logits per chunk: 512 x 49,152 float32 is 100 MB per tensor (SmolLM2)."""


def mtp_distillation_loss(
    model: CausalLM,
    batch: Batch,
    hidden: Tensor,
    *,
    detach_hidden: bool = True,
    chunk_rows: int = CHUNK_ROWS,
) -> Tensor:
    """Mean KL(main head at i + 1 || MTP at i) over the batch's pairs, a scalar with autograd
    through the MTP layer (and through the shared embedding and head unless they are
    frozen). `hidden` is `forward_hidden(model, batch, ctx)`; the signature is the
    pretraining loop's `extra_loss(model, batch, hidden)`.

    `detach_hidden` (default True) stops the gradient at the MTP layer's input hidden state.
    Frozen-trunk training needs it; for joint training it is still the default because the
    goal is a draft of the model as it is: letting the KL reach the trunk (DeepSeek-V3 lets
    its one-hot MTP loss do so, as a densifying signal) would trade the main model's own
    quality for being easier to draft. Pass False to train the trunk DeepSeek-V3's way."""
    if not model.num_mtp_layers:
        raise TrainingError(f"{type(model).__name__} was built without an MTP layer")
    if hidden.shape[0] != len(batch.input_ids):
        raise TrainingError(
            f"hidden states for {hidden.shape[0]} positions, the batch has {len(batch.input_ids)}"
        )
    source, lengths = _pair_positions(batch.doc_lengths, hidden.device)
    if not lengths:
        raise TrainingError("no document in the batch has the 3 tokens an MTP target needs")
    inputs = hidden.detach() if detach_hidden else hidden
    model.allocate_kv_cache(len(source))
    states = model.mtp_forward(
        batch.input_ids[source + 1], inputs[source], contiguous_context(lengths, hidden.device)
    )
    teacher = hidden[source + 1].detach()
    total = states.new_zeros((), dtype=torch.float32)
    chunk_kl = partial(_chunk_kl, model)
    # One chunk gains nothing from checkpointing (its logits are live at the peak either
    # way) and would pay a second pass over the vocabulary in the backward.
    recompute = len(source) > chunk_rows and torch.is_grad_enabled() and states.requires_grad
    for start in range(0, len(source), chunk_rows):
        rows = slice(start, start + chunk_rows)
        if recompute:
            total = total + checkpoint(chunk_kl, states[rows], teacher[rows], use_reentrant=False)
        else:
            total = total + chunk_kl(states[rows], teacher[rows])
    return total / len(source)


def _chunk_kl(model: CausalLM, states: Tensor, teacher_hidden: Tensor) -> Tensor:
    """Summed KL(teacher || student) of one chunk of rows."""
    with torch.no_grad():
        teacher = F.log_softmax(model.compute_logits(teacher_hidden), dim=-1)
    student = F.log_softmax(model.compute_logits(states), dim=-1)
    return F.kl_div(student, teacher, log_target=True, reduction="sum")


def _pair_positions(doc_lengths: tuple[int, ...], device: torch.device) -> tuple[Tensor, list[int]]:
    """Batch positions i of every pair with a teacher (MTP positions 0 .. L - 3 of each
    document, documents in order), and the pairs per document that has any."""
    starts, lengths, offset = [], [], 0
    for length in doc_lengths:
        if length >= 3:
            starts.append(torch.arange(offset, offset + length - 2))
            lengths.append(length - 2)
        offset += length
    if not starts:
        return torch.empty(0, dtype=torch.long, device=device), []
    return torch.cat(starts).to(device), lengths


def contiguous_context(lengths: list[int], device: torch.device) -> ForwardContext:
    """Each document's pairs their own sequence in a scratch cache, on `device`."""
    ctx = ForwardContext.contiguous(lengths)
    ctx.positions = ctx.positions.to(device)
    ctx.slot_mapping = ctx.slot_mapping.to(device)
    ctx.gather_indices = [g.to(device) for g in ctx.gather_indices]
    return ctx
