"""Where pretraining rows come from, and how a data-parallel run walks them.

A `RowSource` is anything with the shape of `opencomposer.training.packing`'s two functions:
`read_rows(data_dir, split, seq_len, *, start, rank, world_size)` yields the packed rows of a
split from global row `start` on, rank `rank` taking rows start + rank, start + rank +
world_size, ...; `count_rows` says how many rows the split has at that length. Tests give
synthetic rows through the same protocol.

An epoch uses `count // global_batch` whole global batches (the rest is dropped, as a
drop-last loader does), so the position in the data is the step alone: a resumed run, or the
same run with another number of ranks, reads exactly the rows the uninterrupted run would.
"""

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from opencomposer.training.batch import PackedRow
from opencomposer.training.errors import TrainingError
from opencomposer.training.packing import count_rows, read_rows


class RowSource(Protocol):
    def rows(
        self, split: str, seq_len: int, *, start: int, rank: int, world_size: int
    ) -> Iterator[PackedRow]: ...

    def count(self, split: str, seq_len: int) -> int: ...


@dataclass(frozen=True)
class PackedData:
    """The packed corpus `opencomposer train data` wrote into `data_dir`."""

    data_dir: Path

    @property
    def tokenizer_dir(self) -> Path | None:
        """The tokenizer `opencomposer train tokenizer` encoded the rows with, if it did."""
        folder = self.data_dir / "tokenizer"
        return folder if (folder / "tokenizer.json").is_file() else None

    def rows(
        self, split: str, seq_len: int, *, start: int, rank: int, world_size: int
    ) -> Iterator[PackedRow]:
        return read_rows(
            self.data_dir, split, seq_len, start=start, rank=rank, world_size=world_size
        )

    def count(self, split: str, seq_len: int) -> int:
        return count_rows(self.data_dir, split, seq_len)


def train_batches(
    source: RowSource,
    seq_len: int,
    global_rows: int,
    *,
    first_step: int,
    rank: int,
    world_size: int,
) -> Iterator[list[PackedRow]]:
    """This rank's rows of each global batch of the train split, from step `first_step`
    (counted within the stage), epoch after epoch."""
    per_rank = global_rows // world_size
    available = source.count("train", seq_len)
    steps_per_epoch = available // global_rows
    if steps_per_epoch == 0:
        raise TrainingError(
            f"the train split has {available} rows of {seq_len} tokens, fewer than one "
            f"global batch of {global_rows}: use more data or a smaller --batch-rows"
        )
    step = first_step
    while True:
        in_epoch = step % steps_per_epoch
        rows = source.rows(
            "train", seq_len, start=in_epoch * global_rows, rank=rank, world_size=world_size
        )
        for _ in range(steps_per_epoch - in_epoch):
            batch = list(itertools.islice(rows, per_rank))
            if len(batch) < per_rank:
                raise TrainingError(
                    f"the train split at {seq_len} tokens ran out of rows before the "
                    f"{available} it counts"
                )
            yield batch
            step += 1


def val_batches(
    source: RowSource, seq_len: int, val_rows: int, batch_rows: int, *, rank: int, world_size: int
) -> list[list[PackedRow]]:
    """This rank's share of the first `val_rows` rows of the val split, in batches of at most
    `batch_rows`: the same held-out rows at every evaluation, whatever the number of ranks."""
    available = source.count("val", seq_len)
    if available == 0:
        raise TrainingError(f"the val split has no rows of {seq_len} tokens (held-out loss)")
    mine = len(range(rank, min(val_rows, available), world_size))
    rows = list(
        itertools.islice(
            source.rows("val", seq_len, start=0, rank=rank, world_size=world_size), mine
        )
    )
    return [rows[i : i + batch_rows] for i in range(0, len(rows), batch_rows)]
