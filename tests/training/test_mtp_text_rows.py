"""Rows from a folder of text files: packing across documents and rows, the held-out split."""

from pathlib import Path

import numpy as np
import pytest

from opencomposer.training.errors import TrainingError
from opencomposer.training.text_rows import pack_documents, split_files


def test_documents_are_packed_end_to_end_and_split_across_rows() -> None:
    rows = pack_documents([[1, 2, 3], [4, 5, 6, 7, 8, 9], [10, 11], [12]], 4)
    assert [row.tokens.tolist() for row in rows] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    assert [row.doc_lengths for row in rows] == [(3, 1), (4,), (1, 2, 1)]
    assert rows[0].tokens.dtype == np.int32


def test_the_last_partial_row_is_dropped() -> None:
    assert [r.tokens.tolist() for r in pack_documents([[1, 2, 3, 4, 5]], 3)] == [[1, 2, 3]]


def test_rows_too_short_for_a_target_are_refused() -> None:
    with pytest.raises(TrainingError, match="3 tokens"):
        pack_documents([[1, 2]], 2)


def test_the_split_is_by_path_and_skips_hidden_folders(tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / "pkg").mkdir(exist_ok=True)
        (tmp_path / "pkg" / f"m{i}.py").write_text(f"x = {i}\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref\n")
    train, held_out = split_files(tmp_path, 25)
    assert len(train) + len(held_out) == 40 and 0 < len(held_out) < 20
    assert not any(".git" in p.parts for p in train + held_out)
    (tmp_path / "pkg" / "new.py").write_text("y = 1\n")
    train_again, held_again = split_files(tmp_path, 25)
    assert set(held_out) <= set(held_again) and set(train) <= set(train_again)


def test_an_empty_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match="no text files"):
        split_files(tmp_path, 10)
    with pytest.raises(TrainingError, match="no folder"):
        split_files(tmp_path / "absent", 10)
