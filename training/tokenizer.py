"""The code tokenizer: tiny-moe's recipe (byte-level BPE, DeepSeek's chat, tool-call and FIM
markers as special tokens, BOS id 0 and EOS id 1) trained on a corpus's train split.

The recipe itself lives with the seeded model (`serving.model_recipes.tiny_moe`); this module
only streams it a corpus and writes the same two files, so the engine finds the chat format
and `find_fim` finds the sentinels in a trained model exactly as in the seeded one.
"""

import hashlib
import json
import shutil
from pathlib import Path

from tokenizers import Tokenizer

from opencomposer.serving.engines.embedded.chat_format import (
    DEEPSEEK_BOS,
    DEEPSEEK_EOS,
    DEEPSEEK_SPECIAL_TOKENS,
)
from opencomposer.serving.engines.embedded.fim import find_fim
from opencomposer.serving.model_recipes.tiny_moe import (
    VOCAB_SIZE,
    train_tokenizer,
    write_tokenizer,
)
from opencomposer.training.corpus import iter_corpus
from opencomposer.training.errors import TrainingError

_ORIGIN = "trained_on.json"
"""Beside tokenizer.json: the corpus and vocabulary size it was trained with."""


def train_code_tokenizer(data_dir: Path, *, vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """Train on `data_dir`'s train split and write `data_dir/tokenizer/` (replaced whole). A
    tokenizer already trained there on the same corpus with the same size is reused, so a
    rerun that resumes tokenizing does not spend a minute retraining."""
    if vocab_size < len(DEEPSEEK_SPECIAL_TOKENS) + 256:
        raise TrainingError(
            f"--vocab-size {vocab_size} is too small: it needs 256 bytes and "
            f"{len(DEEPSEEK_SPECIAL_TOKENS)} special tokens; use 1024 or more"
        )
    target = data_dir / "tokenizer"
    origin = {"corpus_sha256": corpus_sha256(data_dir), "vocab_size": vocab_size}
    if (target / _ORIGIN).is_file() and json.loads((target / _ORIGIN).read_text()) == origin:
        return load_tokenizer(target)
    texts = (record["text"] for record in iter_corpus(data_dir, "train"))
    tokenizer = train_tokenizer(texts, vocab_size)
    check_special_tokens(tokenizer)
    partial = data_dir / "tokenizer.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    write_tokenizer(tokenizer, partial)
    (partial / _ORIGIN).write_text(json.dumps(origin) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return tokenizer


def load_tokenizer(folder: Path) -> Tokenizer:
    """A tokenizer folder's tokenizer.json, checked to carry the special tokens."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise TrainingError(f"no tokenizer in {folder}: run `opencomposer train tokenizer` first")
    tokenizer = Tokenizer.from_file(str(path))
    check_special_tokens(tokenizer)
    return tokenizer


def corpus_sha256(data_dir: Path) -> str:
    """Identifies a corpus build: its state file lists every shard and count."""
    state = data_dir / "corpus" / "state.json"
    if not state.is_file():
        raise TrainingError(f"no corpus in {data_dir}: run `opencomposer train data --out DIR`")
    return hashlib.sha256(state.read_bytes()).hexdigest()


def tokenizer_sha256(tokenizer: Tokenizer) -> str:
    """Identifies the tokenizer that token shards were made with."""
    return hashlib.sha256(tokenizer.to_str().encode("utf-8")).hexdigest()


def check_special_tokens(tokenizer: Tokenizer) -> None:
    """Raise when a DeepSeek marker is missing or not one special token, or BOS/EOS are not
    ids 0/1: pretraining on such a tokenizer would teach a model the engine cannot prompt."""
    special = {token.content for token in tokenizer.get_added_tokens_decoder().values()}
    missing = [t for t in DEEPSEEK_SPECIAL_TOKENS if t not in special]
    if missing:
        raise TrainingError(
            f"the tokenizer lacks special tokens {', '.join(missing)}: "
            "train one with `opencomposer train tokenizer`"
        )
    if tokenizer.token_to_id(DEEPSEEK_BOS) != 0 or tokenizer.token_to_id(DEEPSEEK_EOS) != 1:
        raise TrainingError(
            "the tokenizer's BOS and EOS are not ids 0 and 1: "
            "train one with `opencomposer train tokenizer`"
        )
    if find_fim(tokenizer) is None:
        raise TrainingError("the tokenizer has no FIM sentinels the engine recognises")
