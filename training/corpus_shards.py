"""The corpus on disk: zstd-compressed JSONL shards renamed into place when complete, and the
state file that says which shards and sources are committed, with the counts so far (see
`corpus`)."""

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import zstandard

SPLITS = ("train", "val")
ZSTD_LEVEL = 3
"""Code JSONL compresses 4.7x at level 3 (a 32 MB shard to 6.8 MB in 0.15 s, read back in
0.06 s): the corpus is an intermediate that stays on disk beside its tokens."""


@dataclass
class Counts:
    seen: int = 0
    kept: int = 0
    bytes_seen: int = 0
    bytes_kept: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    licenses: Counter[str] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)
    splits: dict[str, Counter[str]] = field(
        default_factory=lambda: {split: Counter() for split in SPLITS}
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "seen": self.seen,
            "kept": self.kept,
            "bytes": {"seen": self.bytes_seen, "kept": self.bytes_kept},
            "skipped": dict(sorted(self.skipped.items())),
            "licenses": dict(sorted(self.licenses.items())),
            "languages": dict(sorted(self.languages.items())),
            "splits": {split: dict(sorted(c.items())) for split, c in self.splits.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Counts":
        return cls(
            seen=data["seen"],
            kept=data["kept"],
            bytes_seen=data["bytes"]["seen"],
            bytes_kept=data["bytes"]["kept"],
            skipped=Counter(data["skipped"]),
            licenses=Counter(data["licenses"]),
            languages=Counter(data["languages"]),
            splits={split: Counter(c) for split, c in data["splits"].items()},
        )


class ShardWriter:
    """The open shard of one split, under a temporary name until `commit`."""

    def __init__(self, folder: Path, index: int) -> None:
        self.folder = folder
        self.index = index
        self.size = 0
        self._file: IO[bytes] | None = None
        self._handle: zstandard.ZstdCompressionWriter | None = None
        self._signatures: list[np.ndarray] = []

    @property
    def name(self) -> str:
        return f"shard-{self.index:05d}.jsonl.zst"

    def write(self, record: dict[str, str], signature: np.ndarray) -> None:
        if self._handle is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._file = (self.folder / (self.name + ".tmp")).open("wb")
            self._handle = zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(self._file)
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        self._handle.write(line)
        self.size += len(line)
        self._signatures.append(signature)

    def commit(self) -> str | None:
        """Rename the shard into place; its name, or None when nothing was written."""
        if self._handle is None or self._file is None:
            return None
        self._handle.flush(zstandard.FLUSH_FRAME)
        os.fsync(self._file.fileno())
        self._handle.close()  # closes the file too
        signatures = self.folder / (self.name + ".minhash.tmp.npy")
        np.save(signatures, np.stack(self._signatures))
        signatures.rename(self.folder / (self.name + ".minhash.npy"))
        (self.folder / (self.name + ".tmp")).rename(self.folder / self.name)
        name = self.name
        self.index += 1
        self.size, self._file, self._handle, self._signatures = 0, None, None, []
        return name


class CorpusState:
    def __init__(self, path: Path) -> None:
        self.path = path
        data = json.loads(path.read_text()) if path.is_file() else {}
        self.shards: dict[str, list[str]] = data.get("shards", {s: [] for s in SPLITS})
        self.finished: list[str] = data.get("finished", [])
        self.counts = Counts.from_json(data["counts"]) if "counts" in data else Counts()
        self.complete: bool = data.get("complete", False)
        self.val_fraction: float | None = data.get("val_fraction")

    def save(self) -> None:
        data = {
            "shards": self.shards,
            "finished": self.finished,
            "counts": self.counts.to_json(),
            "complete": self.complete,
            "val_fraction": self.val_fraction,
        }
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=1) + "\n")
        temporary.rename(self.path)


def iter_shard(path: Path) -> Iterator[dict[str, Any]]:
    """The records of one shard, in order."""
    with zstandard.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)
