"""Packed rows from a folder of text files, until the corpus builder's `read_rows` lands.

Files are tokenized with the model's own tokenizer and laid end to end, each a document of
its own (`PackedRow.doc_lengths`), a document that overflows a row continuing in the next; the
last partial row is dropped. Which files are held out is decided by a hash of the file's path
inside the folder, so adding a file never moves another between splits.
"""

import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from opencomposer.training.batch import PackedRow
from opencomposer.training.errors import TrainingError


def split_files(data_dir: Path, eval_percent: int) -> tuple[list[Path], list[Path]]:
    """(train, held-out) UTF-8 text files under `data_dir`, hidden folders skipped."""
    if not data_dir.is_dir():
        raise TrainingError(f"--data: no folder {data_dir}")
    train: list[Path] = []
    held_out: list[Path] = []
    for path in sorted(data_dir.rglob("*")):
        relative = path.relative_to(data_dir)
        if not path.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        bucket = int(hashlib.sha1(relative.as_posix().encode()).hexdigest(), 16) % 100
        (held_out if bucket < eval_percent else train).append(path)
    if not train:
        raise TrainingError(f"{data_dir}: no text files to train on")
    return train, held_out


def tokenize_files(files: Iterable[Path], tokenizer: Tokenizer) -> list[list[int]]:
    """Token ids of each UTF-8 file (others, binaries, are skipped), empty files left out."""
    docs = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if ids:
            docs.append(ids)
    return docs


def pack_documents(docs: Iterable[list[int]], seq_len: int) -> list[PackedRow]:
    """Documents end to end in rows of `seq_len` tokens."""
    if seq_len < 3:
        raise TrainingError(f"--seq-len {seq_len}: an MTP target needs rows of 3 tokens or more")
    rows: list[PackedRow] = []
    tokens: list[int] = []
    lengths: list[int] = []
    for doc in docs:
        rest = list(doc)
        while rest:
            take = rest[: seq_len - len(tokens)]
            tokens += take
            lengths.append(len(take))
            rest = rest[len(take) :]
            if len(tokens) == seq_len:
                rows.append(PackedRow(np.array(tokens, dtype=np.int32), tuple(lengths)))
                tokens, lengths = [], []
    return rows


def text_rows(files: Iterable[Path], tokenizer: Tokenizer, seq_len: int) -> list[PackedRow]:
    return pack_documents(tokenize_files(files, tokenizer), seq_len)
