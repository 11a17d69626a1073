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

Chained steps (`steps` > 1) train the drafts after the first the way the engine makes them,
EAGLE-3's "training-time test": draft s + 1 of a round feeds the MTP layer its own step-s output
state with the next token, at the next position, reading the true entries of the cache before
the round and its own chain's entries since. So step s at MTP position q takes the step s - 1
state at q - 1 and token q + 1, and attends to the true entries 0 .. q - s + 1 and to the
chain's entry of each step 2 .. s at q - s + 2 .. q; its target is the teacher of position q
(every step at q predicts the same token q + 2). All queries of a step run as one forward per
document with an explicit mask (`ForwardContext.masks`). Tokens are the data's (a draft that
was rejected ends the round anyway); on the model's own greedy outputs they are its drafts.

`vocab` trains the drafts for a reduced draft vocabulary (FR-Spec): teacher and student both
over those rows of the LM head only, the teacher renormalised there. A draft is the argmax
over the same rows, so that is the distribution it must match, and the vocabulary-wide part
costs vocab / full of the whole head (8,192 of SmolLM2's 49,152: a sixth).

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

CHUNK_LOGITS = 512 * 49_152
"""Logits per chunk: 512 rows of SmolLM2's whole vocabulary, 100 MB per float32 tensor; a
reduced draft vocabulary takes as many more rows (8,192 tokens: 3,072 rows)."""


def mtp_distillation_loss(
    model: CausalLM,
    batch: Batch,
    hidden: Tensor,
    *,
    detach_hidden: bool = True,
    chunk_rows: int | None = None,
    steps: int = 1,
    vocab: Tensor | None = None,
) -> Tensor:
    """Mean over chained steps 1 .. `steps` of the mean KL(main head at i + 1 || MTP at i)
    over the step's pairs: a scalar with autograd through the MTP layer (and through the
    shared embedding and head unless they are frozen). `hidden` is
    `forward_hidden(model, batch, ctx)`; the signature is the pretraining loop's
    `extra_loss(model, batch, hidden)`. `vocab`: [n] token ids drafts are drawn from.

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
    if steps < 1:
        raise TrainingError(f"chained steps must be at least 1, not {steps}")
    source, lengths = _pair_positions(batch.doc_lengths, hidden.device)
    if not lengths:
        raise TrainingError("no document in the batch has the 3 tokens an MTP target needs")
    inputs = hidden.detach() if detach_hidden else hidden
    tokens = batch.input_ids[source + 1]
    teacher = hidden[source + 1].detach()
    head = None if vocab is None else model.lm_head.weight.index_select(0, vocab.to(hidden.device))
    width = model.vocab_size if head is None else len(head)
    kl = partial(_mean_kl, model, head, chunk_rows or max(1, CHUNK_LOGITS // width))
    model.allocate_kv_cache(steps * len(source))
    state = model.mtp_forward(tokens, inputs[source], contiguous_context(lengths, hidden.device))
    total = kl(state, teacher)
    rows = torch.arange(len(source), device=hidden.device)
    for step in range(2, steps + 1):
        chained = chained_context(lengths, step, hidden.device)
        if chained is None:
            break  # no document is long enough for this step (nor for any later one)
        ctx, pairs = chained
        at = torch.full((len(source),), -1, dtype=torch.long, device=hidden.device)
        at[rows] = torch.arange(len(rows), device=hidden.device)
        state = model.mtp_forward(tokens[pairs], state[at[pairs - 1]], ctx)
        total = total + kl(state, teacher[pairs])
        rows = pairs
    return total / steps


def _mean_kl(
    model: CausalLM, head: Tensor | None, chunk_rows: int, states: Tensor, teacher: Tensor
) -> Tensor:
    """Mean KL(teacher || student) over rows, chunk by chunk (see the module docstring)."""
    chunk_kl = partial(_chunk_kl, model, head)
    total = states.new_zeros((), dtype=torch.float32)
    # One chunk gains nothing from checkpointing (its logits are live at the peak either
    # way) and would pay a second pass over the vocabulary in the backward.
    recompute = len(states) > chunk_rows and torch.is_grad_enabled() and states.requires_grad
    for start in range(0, len(states), chunk_rows):
        rows = slice(start, start + chunk_rows)
        if recompute:
            total = total + checkpoint(chunk_kl, states[rows], teacher[rows], use_reentrant=False)
        else:
            total = total + chunk_kl(states[rows], teacher[rows])
    return total / len(states)


def _chunk_kl(
    model: CausalLM, head: Tensor | None, states: Tensor, teacher_hidden: Tensor
) -> Tensor:
    """Summed KL(teacher || student) of one chunk of rows, over `head`'s rows when given."""

    def logits(rows: Tensor) -> Tensor:
        return model.compute_logits(rows) if head is None else F.linear(rows, head).float()

    with torch.no_grad():
        teacher = F.log_softmax(logits(teacher_hidden), dim=-1)
    student = F.log_softmax(logits(states), dim=-1)
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


def chained_context(
    lengths: list[int], step: int, device: torch.device
) -> tuple[ForwardContext, Tensor] | None:
    """Chained step `step` (>= 2) of every document with `lengths[d]` pairs: the context of
    its queries, MTP positions q = step - 1 .. n - 1 of each document, and their pair indices
    (documents in order); None when no document has such a position. Step m's entries live
    at slots (m - 1) * pairs + pair index, the true entries (step 1) first."""
    total = sum(lengths)
    positions: list[Tensor] = []
    slots: list[Tensor] = []
    gathers: list[Tensor] = []
    pairs: list[Tensor] = []
    masks: dict[int, Tensor] = {}
    query_lens: list[int] = []
    offset = 0
    for n in lengths:
        if n >= step:
            q, cols = torch.arange(step - 1, n), torch.arange(n)
            gathers.append(torch.cat([(m - 1) * total + offset + cols for m in range(1, step + 1)]))
            # The true entries up to the round's start, then one entry of each chained step.
            blocks = [cols[None, :] <= (q - step + 1)[:, None]]
            blocks += [cols[None, :] == (q - step + m)[:, None] for m in range(2, step + 1)]
            masks[len(query_lens)] = torch.cat(blocks, dim=1).to(device)
            positions.append(q)
            slots.append((step - 1) * total + offset + q)
            pairs.append(offset + q)
            query_lens.append(n - step + 1)
        offset += n
    if not query_lens:
        return None
    ctx = ForwardContext(
        positions=torch.cat(positions).to(device),
        query_lens=query_lens,
        context_lens=[step * n for n in lengths if n >= step],
        slot_mapping=torch.cat(slots).to(device),
        gather_indices=[g.to(device) for g in gathers],
        masks=masks,
    )
    return ctx, torch.cat(pairs).to(device)
