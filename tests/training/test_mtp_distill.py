"""The MTP self-distillation loss against a per-document reference written the way the engine
pairs an MTP layer's inputs (`engine logits --mtp`), its chunking, and where its gradients go."""

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.llama_mtp import write_llama_checkpoint

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.training.batch import Batch, PackedRow, forward_hidden
from opencomposer.training.errors import TrainingError
from opencomposer.training.mtp_distill import mtp_distillation_loss

pytest.importorskip("transformers")


@pytest.fixture
def model(tmp_path: Path) -> CausalLM:
    write_llama_checkpoint(tmp_path, mtp=True)
    return load_model(tmp_path)


def rows() -> list[PackedRow]:
    gen = np.random.default_rng(1)
    tokens = [gen.integers(0, 128, 16).astype(np.int32) for _ in range(2)]
    # Documents of 1 and 2 tokens have no target; 3 tokens have exactly one.
    return [PackedRow(tokens[0], (9, 1, 6)), PackedRow(tokens[1], (2, 3, 11))]


def reference_loss(model: CausalLM, batch: Batch) -> torch.Tensor:
    """Each document alone: one forward, the MTP layer over (hidden i, token i + 1) for every
    i, student row i against the main head's row i + 1 while token i + 2 is in the document."""
    kls, offset = [], 0
    for length in batch.doc_lengths:
        ids = batch.input_ids[offset : offset + length]
        offset += length
        if length < 3:
            continue
        model.allocate_kv_cache(length)
        hidden = model(ids, ForwardContext.contiguous([length]))
        logits = model.compute_logits(hidden)
        states = model.mtp_forward(ids[1:], hidden[:-1], ForwardContext.contiguous([length - 1]))
        student = F.log_softmax(model.compute_logits(states), -1)[: length - 2]
        teacher = F.log_softmax(logits, -1)[1 : length - 1]
        kls.append((teacher.exp() * (teacher - student)).sum(-1))
    return torch.cat(kls).mean()


def loss_and_grads(model: CausalLM, chunk_rows: int) -> tuple[float, list[torch.Tensor]]:
    batch = Batch.from_rows(rows())
    hidden = forward_hidden(model, batch, batch.context())
    mtp = list(model.model.layers[3].parameters())  # type: ignore[union-attr,index]
    model.zero_grad(set_to_none=True)
    loss = mtp_distillation_loss(model, batch, hidden, chunk_rows=chunk_rows)
    loss.backward()
    return float(loss.detach()), [p.grad.clone() for p in mtp if p.grad is not None]


def test_loss_equals_the_per_document_reference(model: CausalLM) -> None:
    batch = Batch.from_rows(rows())
    with torch.no_grad():
        hidden = forward_hidden(model, batch, batch.context())
        loss = mtp_distillation_loss(model, batch, hidden, chunk_rows=4)
        expected = reference_loss(model, batch)
    assert float(loss) > 0.1
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)


def test_chunking_changes_neither_the_loss_nor_the_gradients(model: CausalLM) -> None:
    whole, whole_grads = loss_and_grads(model, chunk_rows=10_000)
    chunked, chunked_grads = loss_and_grads(model, chunk_rows=3)
    assert chunked == pytest.approx(whole, rel=1e-6)
    assert len(whole_grads) == len(chunked_grads) == 13
    for a, b in zip(whole_grads, chunked_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("detach", [True, False])
def test_detach_hidden_decides_whether_the_trunk_learns(model: CausalLM, detach: bool) -> None:
    batch = Batch.from_rows(rows())
    hidden = forward_hidden(model, batch, batch.context())
    mtp_distillation_loss(model, batch, hidden, detach_hidden=detach).backward()
    trunk = model.model.layers[1].mlp.down_proj.weight  # type: ignore[union-attr,index]
    eh_proj = model.model.layers[3].eh_proj.weight  # type: ignore[union-attr,index]
    assert eh_proj.grad is not None and float(eh_proj.grad.abs().sum()) > 0
    assert (trunk.grad is None) == detach


def test_a_batch_without_targets_is_refused(model: CausalLM) -> None:
    batch = Batch.from_rows([PackedRow(np.arange(4, dtype=np.int32), (2, 1, 1))])
    hidden = forward_hidden(model, batch, batch.context())
    with pytest.raises(TrainingError, match="3 tokens"):
        mtp_distillation_loss(model, batch, hidden)


def test_a_model_without_mtp_is_refused(tmp_path: Path) -> None:
    write_llama_checkpoint(tmp_path, mtp=False)
    plain = load_model(tmp_path)
    batch = Batch.from_rows(rows())
    with pytest.raises(TrainingError, match="without an MTP layer"):
        mtp_distillation_loss(plain, batch, forward_hidden(plain, batch, batch.context()))


def chained_reference(
    model: CausalLM, batch: Batch, steps: int, vocab: torch.Tensor | None = None
) -> torch.Tensor:
    """The chained loss written the way the engine drafts (`chained_drafts`): each round
    start of each document its own chain of one-query forwards, reading the true entries up
    to the round's start and its own chain's entries, fed the data's next token."""

    def log_probs(hidden: torch.Tensor) -> torch.Tensor:
        logits = model.compute_logits(hidden)
        return F.log_softmax(logits if vocab is None else logits[:, vocab], -1)

    per_step: list[list[torch.Tensor]] = [[] for _ in range(steps)]
    offset = 0
    for length in batch.doc_lengths:
        ids = batch.input_ids[offset : offset + length]
        offset += length
        n = length - 2
        if n < 1:
            continue
        model.allocate_kv_cache(n + n * steps)
        with torch.no_grad():
            hidden = model(ids, ForwardContext.contiguous([length]))
        teacher = log_probs(hidden).detach()
        first = model.mtp_forward(ids[1 : n + 1], hidden[:n], ForwardContext.contiguous([n]))
        for start in range(n):
            chain = n + start * steps  # this round's own slots
            state = first[start : start + 1]
            for step in range(1, steps + 1):
                q = start + step - 1
                if q >= n:
                    break
                if step > 1:
                    ctx = ForwardContext(
                        positions=torch.tensor([q]),
                        query_lens=[1],
                        context_lens=[start + step],
                        slot_mapping=torch.tensor([chain + step - 2]),
                        gather_indices=[
                            torch.cat(
                                [torch.arange(start + 1), torch.arange(chain, chain + step - 1)]
                            )
                        ],
                    )
                    state = model.mtp_forward(ids[q + 1 : q + 2], state, ctx)
                student = log_probs(state)[0]
                kl = (teacher[q + 1].exp() * (teacher[q + 1] - student)).sum()
                per_step[step - 1].append(kl)
    return torch.stack([torch.stack(kls).mean() for kls in per_step]).mean()


def long_rows() -> list[PackedRow]:
    gen = np.random.default_rng(2)
    tokens = gen.integers(0, 128, 24).astype(np.int32)
    # Documents with 1, 2, 3 and 12 pairs: some have no query at the later steps.
    return [*rows(), PackedRow(tokens, (3, 4, 5, 12))]


@pytest.mark.parametrize("steps", [2, 3])
def test_chained_steps_equal_the_engine_style_reference_with_their_gradients(
    model: CausalLM, steps: int
) -> None:
    batch = Batch.from_rows(long_rows())
    mtp = list(model.model.layers[3].parameters())  # type: ignore[union-attr,index]
    with torch.no_grad():
        hidden = forward_hidden(model, batch, batch.context())
    model.zero_grad(set_to_none=True)
    loss = mtp_distillation_loss(model, batch, hidden, steps=steps, chunk_rows=5)
    loss.backward()
    grads = [p.grad.clone() for p in mtp if p.grad is not None]
    model.zero_grad(set_to_none=True)
    expected = chained_reference(model, batch, steps)
    expected.backward()
    assert float(loss.detach()) > 0.1
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    assert len(grads) == 13
    for got, want in zip(grads, [p.grad for p in mtp], strict=True):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-4)


def test_one_chained_step_is_the_plain_loss(model: CausalLM) -> None:
    batch = Batch.from_rows(long_rows())
    with torch.no_grad():
        hidden = forward_hidden(model, batch, batch.context())
        plain = mtp_distillation_loss(model, batch, hidden)
        one = mtp_distillation_loss(model, batch, hidden, steps=1)
        two = mtp_distillation_loss(model, batch, hidden, steps=2)
    assert float(one) == float(plain) != pytest.approx(float(two))


def test_a_draft_vocabulary_trains_the_drafts_over_its_rows_only(model: CausalLM) -> None:
    batch = Batch.from_rows(long_rows())
    vocab = torch.tensor([5, 0, 17, 99, 3, 64, 127, 40])
    with torch.no_grad():
        hidden = forward_hidden(model, batch, batch.context())
        loss = mtp_distillation_loss(model, batch, hidden, steps=2, vocab=vocab)
        whole = mtp_distillation_loss(model, batch, hidden, steps=2)
        expected = chained_reference(model, batch, 2, vocab)
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    assert float(loss) != pytest.approx(float(whole))


def test_chained_steps_must_be_positive(model: CausalLM) -> None:
    batch = Batch.from_rows(rows())
    hidden = forward_hidden(model, batch, batch.context())
    with pytest.raises(TrainingError, match="at least 1"):
        mtp_distillation_loss(model, batch, hidden, steps=0)
