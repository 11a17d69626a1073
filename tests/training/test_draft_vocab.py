"""The FR-Spec draft vocabulary: the most frequent tokens, written where the engine reads it."""

from pathlib import Path

import numpy as np
import pytest
import torch
from support.pretrain_fixtures import write_model

from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.training.batch import PackedRow
from opencomposer.training.draft_vocab import coverage, frequent_tokens, write_draft_vocab
from opencomposer.training.errors import TrainingError


def row(*tokens: int) -> PackedRow:
    return PackedRow(np.array(tokens, dtype=np.int32), (len(tokens),))


def test_most_frequent_first_ties_to_the_lower_id_and_sorted() -> None:
    rows = [row(5, 5, 5, 2, 2, 9), row(9, 7, 3, 3)]
    # counts: 5 x3, 2 x2, 3 x2, 9 x2, 7 x1
    assert frequent_tokens(rows, 10, 1).tolist() == [5]
    assert frequent_tokens(rows, 10, 3).tolist() == [2, 3, 5]
    assert frequent_tokens(rows, 10, 5).tolist() == [2, 3, 5, 7, 9]
    # unseen ids fill the rest, lowest first, so the set has the size asked for
    assert frequent_tokens(rows, 10, 7).tolist() == [0, 1, 2, 3, 5, 7, 9]


def test_coverage_counts_tokens_inside() -> None:
    rows = [row(1, 1, 2, 3)]
    assert coverage(rows, torch.tensor([1])) == 0.5
    assert coverage(rows, torch.tensor([1, 2, 3])) == 1.0
    assert coverage([], torch.tensor([1])) == 0.0


@pytest.mark.parametrize("size", [0, -1, 11])
def test_sizes_outside_the_vocabulary_are_refused(size: int) -> None:
    with pytest.raises(TrainingError, match="draft vocabulary"):
        frequent_tokens([row(1, 2)], 10, size)


def test_the_engine_drafts_from_the_written_file(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "model")
    ids = frequent_tokens([row(*range(0, 64, 3))], 64, 8)
    write_draft_vocab(folder, ids)
    model = load_model(folder)
    assert model.draft_token_ids is not None
    assert model.draft_token_ids.tolist() == ids.tolist()
    drafts = model.draft_argmax(torch.randn(5, model.config.hidden_size))
    assert set(drafts.tolist()) <= set(ids.tolist())
