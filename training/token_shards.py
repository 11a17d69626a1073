"""`tokenize_corpus`: a corpus's splits as flat token streams the trainer can seek in.

Per split, under `out/<split>/`:
    tokens.bin    uint32 token ids, every document end to end (read with np.memmap)
    offsets.npy   int64 [documents + 1]: where each document starts, then the total
    meta.json     counts, the tokenizer's sha256 and the settings; written last
Each document is its text encoded with special tokens' spellings read as plain characters (a
file that prints `<｜end▁of▁sentence｜>` must not end its document early), then EOS; a
`fim_rate` share becomes a FIM document (`fim_transform`). Streaming and resumable: the token
file grows under a temporary name with a checkpoint (documents done, tokens written, offsets)
every few thousand documents; a rerun truncates to the checkpoint and goes on. A split whose
meta.json matches the tokenizer and settings is done and skipped.
"""

import json
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from opencomposer.serving.engines.embedded.chat_format import DEEPSEEK_EOS
from opencomposer.serving.engines.embedded.fim import find_fim
from opencomposer.training.corpus import iter_corpus
from opencomposer.training.corpus_shards import SPLITS
from opencomposer.training.errors import TrainingError
from opencomposer.training.fim_transform import fim_plan, fim_tokens
from opencomposer.training.tokenizer import check_special_tokens, tokenizer_sha256

TOKEN_DTYPE = np.uint32
CHECKPOINT_DOCS = 2048
"""Documents between checkpoints: one is a flush and a small .npy (milliseconds)."""
ENCODE_BATCH = 256
"""Documents encoded in one `encode_batch` call (the Rust side spreads it over the cores)."""


def tokenize_corpus(
    corpus_dir: Path,
    tokenizer: Tokenizer,
    out: Path,
    *,
    fim_rate: float = 0.5,
    seed: int = 0,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Tokenize every split of the corpus in `corpus_dir` into `out`; returns each split's
    meta. `progress` gets (split, documents done)."""
    if not 0 <= fim_rate <= 1:
        raise TrainingError(f"--fim-rate {fim_rate} must be between 0 and 1")
    check_special_tokens(tokenizer)
    settings = {"tokenizer_sha256": tokenizer_sha256(tokenizer), "fim_rate": fim_rate, "seed": seed}
    metas = {}
    for split in SPLITS:
        folder = out / split
        meta = _done(folder, settings)
        if meta is None:
            meta = _tokenize_split(corpus_dir, split, tokenizer, folder, settings, progress)
        metas[split] = meta
    return metas


def _done(folder: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    meta_file = folder / "meta.json"
    if not meta_file.is_file():
        return None
    meta: dict[str, Any] = json.loads(meta_file.read_text())
    return meta if all(meta.get(k) == v for k, v in settings.items()) else None


class _Encoder:
    def __init__(self, tokenizer: Tokenizer, fim_rate: float, seed: int) -> None:
        # As TextPrompts does: special tokens' spellings in the text are plain characters.
        self._text = Tokenizer.from_str(tokenizer.to_str())
        self._text.encode_special_tokens = True
        found = find_fim(tokenizer)
        assert found is not None  # check_special_tokens saw the sentinels
        self.sentinels = found[1]
        eos = tokenizer.token_to_id(DEEPSEEK_EOS)
        assert eos is not None
        self.eos = eos
        self.fim_rate, self.seed = fim_rate, seed

    def encode(self, records: list[dict[str, Any]]) -> tuple[list[list[int]], int]:
        """Each record's tokens, and how many are FIM documents."""
        plans = [
            fim_plan(r["text"], r["sha256"], fim_rate=self.fim_rate, seed=self.seed)
            for r in records
        ]
        pieces: list[str] = []
        for record, plan in zip(records, plans, strict=True):
            pieces.extend(plan if plan is not None else (record["text"],))
        encoded = iter(e.ids for e in self._text.encode_batch(pieces, add_special_tokens=False))
        documents = []
        for plan in plans:
            if plan is None:
                documents.append([*next(encoded), self.eos])
            else:
                prefix, middle, suffix = next(encoded), next(encoded), next(encoded)
                documents.append(fim_tokens((prefix, middle, suffix), self.sentinels, self.eos))
        return documents, sum(plan is not None for plan in plans)


def _tokenize_split(
    corpus_dir: Path,
    split: str,
    tokenizer: Tokenizer,
    folder: Path,
    settings: dict[str, Any],
    progress: Callable[[str, int], None] | None,
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").unlink(missing_ok=True)
    encoder = _Encoder(tokenizer, settings["fim_rate"], settings["seed"])
    tokens_tmp, checkpoint = folder / "tokens.bin.tmp", folder / "checkpoint.json"
    state = {"documents": 0, "tokens": 0, "fim_documents": 0, **settings}
    offsets = [0]
    if checkpoint.is_file() and tokens_tmp.is_file():
        saved = json.loads(checkpoint.read_text())
        if all(saved.get(k) == v for k, v in settings.items()):
            state = saved
            # The offsets are saved before the state, so they may run ahead of it.
            offsets = np.load(folder / "checkpoint.offsets.npy").tolist()
            offsets = offsets[: state["documents"] + 1]
    with tokens_tmp.open("r+b" if state["documents"] else "wb") as handle:
        handle.truncate(state["tokens"] * TOKEN_DTYPE().itemsize)
        handle.seek(0, 2)
        records = islice(iter_corpus(corpus_dir, split), state["documents"], None)
        for chunk in _chunks(records, ENCODE_BATCH):
            documents, fim = encoder.encode(chunk)
            for ids in documents:
                handle.write(np.asarray(ids, dtype=TOKEN_DTYPE).tobytes())
                offsets.append(offsets[-1] + len(ids))
            state["documents"] += len(chunk)
            state["fim_documents"] += fim
            state["tokens"] = offsets[-1]
            if state["documents"] % CHECKPOINT_DOCS < len(chunk):
                _checkpoint(handle, folder, state, offsets)
            if progress is not None:
                progress(split, state["documents"])
        handle.flush()
    np.save(folder / "offsets.tmp.npy", np.asarray(offsets, dtype=np.int64))
    (folder / "offsets.tmp.npy").rename(folder / "offsets.npy")
    tokens_tmp.rename(folder / "tokens.bin")
    meta = {key: state[key] for key in ("documents", "tokens", "fim_documents")}
    meta |= settings | {"dtype": "uint32", "eos_token_id": encoder.eos}
    _write_json(folder / "meta.json", meta)
    checkpoint.unlink(missing_ok=True)
    (folder / "checkpoint.offsets.npy").unlink(missing_ok=True)
    return meta


def _checkpoint(handle: Any, folder: Path, state: dict[str, Any], offsets: list[int]) -> None:
    handle.flush()
    np.save(folder / "checkpoint.offsets.tmp.npy", np.asarray(offsets, dtype=np.int64))
    (folder / "checkpoint.offsets.tmp.npy").rename(folder / "checkpoint.offsets.npy")
    _write_json(folder / "checkpoint.json", state)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1) + "\n")
    temporary.rename(path)


def _chunks(records: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    while chunk := list(islice(records, size)):
        yield chunk
