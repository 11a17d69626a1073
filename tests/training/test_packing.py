"""read_rows over real token shards: cuts, document pieces, seeking and rank slices."""

from pathlib import Path

import numpy as np
import pytest
from support.corpus_repos import MIT, git_repo

from opencomposer.serving.model_recipes.tiny_moe import corpus_texts, train_tokenizer
from opencomposer.training.batch import Batch
from opencomposer.training.corpus import build_corpus
from opencomposer.training.corpus_sources import Source
from opencomposer.training.errors import TrainingError
from opencomposer.training.packing import count_rows, read_rows
from opencomposer.training.token_shards import tokenize_corpus

SEQ = 64


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pack")
    texts = corpus_texts()
    # Short files and long ones, so rows hold several documents and documents span rows.
    files: dict[str, str | bytes] = {"LICENSE": MIT}
    files |= {f"s{n}.py": f"x_{n} = {n}\n" for n in range(40)}
    files |= {f"m{n}.py": t[:3000] for n, t in enumerate(texts[:10])}
    repo = git_repo(root / "repo", files)
    build_corpus([Source("r", repo, None)], root / "data", val_fraction=0)
    tokenize_corpus(root / "data", train_tokenizer(texts[:40], 1024), root / "data" / "tokens")
    return root / "data"


def _stream(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    folder = data_dir / "tokens" / "train"
    return np.fromfile(folder / "tokens.bin", dtype=np.uint32), np.load(folder / "offsets.npy")


def test_rows_cut_the_stream_and_respect_documents(data_dir: Path):
    tokens, offsets = _stream(data_dir)
    rows = list(read_rows(data_dir, "train", SEQ))
    assert len(rows) == count_rows(data_dir, "train", SEQ) == len(tokens) // SEQ
    assert np.array_equal(np.concatenate([r.tokens for r in rows]), tokens[: len(rows) * SEQ])
    # Every document boundary of the stream is a boundary in the rows, and so is every cut.
    boundaries = set()
    position = 0
    for row in rows:
        for length in row.doc_lengths:
            position += length
            boundaries.add(position)
    covered = len(rows) * SEQ
    expected = {int(o) for o in offsets if 0 < o <= covered} | set(range(SEQ, covered + 1, SEQ))
    assert boundaries == expected
    assert any(len(r.doc_lengths) > 2 for r in rows)
    # The batch built from them never predicts across a document.
    batch = Batch.from_rows(rows[:4])
    assert batch.num_targets == 4 * SEQ - len(batch.doc_lengths)


def test_start_and_ranks(data_dir: Path):
    rows = list(read_rows(data_dir, "train", SEQ))
    resumed = list(read_rows(data_dir, "train", SEQ, start=7))
    assert [r.tokens.tolist() for r in resumed] == [r.tokens.tolist() for r in rows[7:]]
    assert [r.doc_lengths for r in resumed] == [r.doc_lengths for r in rows[7:]]
    for world in (2, 3):
        for rank in range(world):
            sliced = list(read_rows(data_dir, "train", SEQ, start=5, rank=rank, world_size=world))
            expected = [r for i, r in enumerate(rows) if i >= 5 and i % world == rank]
            assert [r.doc_lengths for r in sliced] == [r.doc_lengths for r in expected]
            assert all(
                np.array_equal(a.tokens, b.tokens) for a, b in zip(sliced, expected, strict=True)
            )


def test_bad_arguments(data_dir: Path, tmp_path: Path):
    assert count_rows(data_dir, "val", SEQ) == 0  # nothing held out
    assert list(read_rows(data_dir, "val", SEQ)) == []
    with pytest.raises(TrainingError, match="no tokenized train split"):
        count_rows(tmp_path, "train", SEQ)
    with pytest.raises(TrainingError, match="--seq-len"):
        list(read_rows(data_dir, "train", 0))
    with pytest.raises(TrainingError, match="rank 2 of 2"):
        list(read_rows(data_dir, "train", SEQ, rank=2, world_size=2))
