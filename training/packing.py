"""`read_rows`: a split's token stream as fixed-length packed rows, for pretraining.

The stream is cut at every multiple of `seq_len`, ignoring documents; a document that crosses
a cut continues in the next row as a document of its own (`PackedRow.doc_lengths`, so
attention never crosses it), and the last partial row is dropped. Nothing is shuffled here:
the corpus order is already mixed by repository and the FIM choice is per document, and a
fixed order is what lets a resumed run see exactly the rows it would have seen. Row `i` is
found by arithmetic and a binary search in the document offsets, so resuming at row 10^6
reads nothing before it; with several data-parallel ranks, row `i` goes to rank
`i % world_size`.
"""

import json
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import numpy as np

from opencomposer.training.batch import PackedRow
from opencomposer.training.errors import TrainingError


def _open(data_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    folder = data_dir / "tokens" / split
    if not (folder / "meta.json").is_file():
        raise TrainingError(
            f"no tokenized {split} split in {data_dir}: run `opencomposer train tokenizer "
            f"--data {data_dir}` first"
        )
    meta = json.loads((folder / "meta.json").read_text())
    if not meta["tokens"]:  # an empty split (no repository held out): mmap refuses 0 bytes
        return np.zeros(0, dtype=np.uint32), np.zeros(1, dtype=np.int64)
    tokens = np.memmap(folder / "tokens.bin", dtype=np.uint32, mode="r", shape=(meta["tokens"],))
    offsets = np.load(folder / "offsets.npy", mmap_mode="r")
    return tokens, offsets


def count_rows(data_dir: Path, split: str, seq_len: int) -> int:
    """Full rows of `seq_len` tokens in the split (the tail shorter than a row is dropped)."""
    _check(seq_len)
    tokens, _ = _open(data_dir, split)
    return len(tokens) // seq_len


def read_rows(
    data_dir: Path,
    split: str,
    seq_len: int,
    *,
    start: int = 0,
    rank: int = 0,
    world_size: int = 1,
) -> Iterator[PackedRow]:
    """Rows `start`, `start + 1`, ... (global row indices) that belong to `rank`."""
    _check(seq_len)
    if not 0 <= rank < world_size or start < 0:
        raise TrainingError(f"rank {rank} of {world_size} from row {start} is not a valid slice")
    tokens, offsets = _open(data_dir, split)
    first = start + (rank - start) % world_size
    for row in range(first, len(tokens) // seq_len, world_size):
        yield _row(tokens, offsets, row * seq_len, seq_len)


def _row(tokens: np.ndarray, offsets: np.ndarray, begin: int, seq_len: int) -> PackedRow:
    end = begin + seq_len
    # Document starts strictly inside the row cut it into pieces.
    low = int(np.searchsorted(offsets, begin, side="right"))
    high = int(np.searchsorted(offsets, end, side="left"))
    cuts = [begin, *(int(x) for x in offsets[low:high]), end]
    lengths = tuple(b - a for a, b in pairwise(cuts) if b > a)
    return PackedRow(np.asarray(tokens[begin:end], dtype=np.int32), lengths)


def _check(seq_len: int) -> None:
    if seq_len < 1:
        raise TrainingError(f"--seq-len {seq_len} must be at least 1")
