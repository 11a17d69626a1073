"""The reduced draft vocabulary (FR-Spec): the corpus's most frequent tokens, the only ones an
MTP draft scores.

A draft over SmolLM2's whole vocabulary costs a 576 x 49,152 product per drafted token, about
a fifth of a forward; a code model's text is mostly a few thousand tokens, so drafting over
those keeps most of the acceptance at a fraction of the cost, and verification still scores
every token, so outputs stay exactly the plain decode's. The engine reads the file beside a
model's shards (`loader.DRAFT_VOCAB_FILE`).
"""

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import Tensor

from opencomposer.serving.engines.embedded.loader import DRAFT_VOCAB_FILE
from opencomposer.training.batch import PackedRow
from opencomposer.training.errors import TrainingError


def frequent_tokens(rows: Iterable[PackedRow], vocab_size: int, size: int) -> Tensor:
    """The `size` token ids seen most often in `rows` (ties to the lower id), ascending; ids
    never seen fill the rest in id order, so the set always has `size` distinct ids."""
    if not 0 < size <= vocab_size:
        raise TrainingError(f"a draft vocabulary of {size} tokens needs 1 .. {vocab_size}")
    counts = np.zeros(vocab_size, dtype=np.int64)
    for row in rows:
        counts += np.bincount(row.tokens, minlength=vocab_size)[:vocab_size]
    order = np.lexsort((np.arange(vocab_size), -counts))  # count descending, then id
    return torch.from_numpy(np.sort(order[:size]).astype(np.int64))


def coverage(rows: Iterable[PackedRow], token_ids: Tensor) -> float:
    """The fraction of `rows`' tokens inside the set: an upper bound on the acceptance the
    reduced drafts keep."""
    inside = total = 0
    allowed = token_ids.numpy()
    for row in rows:
        inside += int(np.isin(row.tokens, allowed).sum())
        total += len(row.tokens)
    return inside / total if total else 0.0


def write_draft_vocab(folder: Path, token_ids: Tensor) -> Path:
    path = folder / DRAFT_VOCAB_FILE
    save_file({"token_ids": token_ids.contiguous()}, str(path))
    return path
