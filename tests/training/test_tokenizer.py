"""The code tokenizer, and the token shards made with it (FIM included)."""

import hashlib
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from support.corpus_repos import MIT, git_repo
from tokenizers import Tokenizer, models

from opencomposer.serving.engines.base import TextPrompt
from opencomposer.serving.engines.embedded.chat_format import DEEPSEEK_SPECIAL_TOKENS
from opencomposer.serving.engines.embedded.fim import TextPrompts, find_fim
from opencomposer.serving.model_recipes.tiny_moe import corpus_texts, train_tokenizer
from opencomposer.training import token_shards
from opencomposer.training.corpus import build_corpus, iter_corpus
from opencomposer.training.corpus_sources import Source
from opencomposer.training.errors import TrainingError
from opencomposer.training.fim_transform import fim_pieces
from opencomposer.training.token_shards import tokenize_corpus
from opencomposer.training.tokenizer import (
    check_special_tokens,
    load_tokenizer,
    train_code_tokenizer,
)

SEEDED_TOKENIZER_SHA256 = "bb4773abe673fd321bbef5aba2385457cd04ea0971b865c3a208a5162ffa86d6"
"""tokenizer.json of the seeded tiny-moe before training reused the recipe: it must not move."""
TRICKY = "print('<｜end▁of▁sentence｜>')  # <｜fim▁hole｜> in a string\n"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tok")
    texts = corpus_texts()
    files: dict[str, str | bytes] = {"LICENSE": MIT, "tricky.py": TRICKY}
    files |= {f"m{n}.py": t for n, t in enumerate(texts[:60])}
    repo = git_repo(root / "repo", files)
    build_corpus([Source("r", repo, None)], root / "data", val_fraction=0)
    train_code_tokenizer(root / "data", vocab_size=1024)
    return root / "data"


@pytest.fixture(scope="module")
def tokenizer(data_dir: Path) -> Tokenizer:
    return load_tokenizer(data_dir / "tokenizer")


def test_seeded_tiny_moe_tokenizer_is_unchanged():
    tokenizer = train_tokenizer(corpus_texts())
    assert hashlib.sha256(tokenizer.to_str().encode()).hexdigest() == SEEDED_TOKENIZER_SHA256


def test_special_tokens_present_whole_and_first(tokenizer: Tokenizer, data_dir: Path):
    assert tokenizer.get_vocab_size() == 1024
    for index, token in enumerate(DEEPSEEK_SPECIAL_TOKENS):
        assert tokenizer.encode(token).ids == [index]
    found = find_fim(tokenizer)
    assert found is not None and found[0].prefix == "<｜fim▁begin｜>"
    assert (data_dir / "tokenizer" / "tokenizer_config.json").is_file()


def test_retraining_on_the_same_corpus_reuses_the_tokenizer(data_dir: Path):
    tokenizer_json = data_dir / "tokenizer" / "tokenizer.json"
    before = tokenizer_json.stat().st_mtime_ns
    again = train_code_tokenizer(data_dir, vocab_size=1024)
    assert tokenizer_json.stat().st_mtime_ns == before
    assert again.to_str() == Tokenizer.from_file(str(tokenizer_json)).to_str()


def test_tokenizer_without_special_tokens_is_refused(tmp_path: Path):
    plain = Tokenizer(models.BPE())
    with pytest.raises(TrainingError, match="lacks special tokens <｜begin▁of▁sentence｜>"):
        check_special_tokens(plain)
    with pytest.raises(TrainingError, match="no tokenizer"):
        load_tokenizer(tmp_path)
    with pytest.raises(TrainingError, match="too small"):
        train_code_tokenizer(tmp_path, vocab_size=100)


def _documents(folder: Path) -> list[list[int]]:
    tokens = np.fromfile(folder / "tokens.bin", dtype=np.uint32)
    offsets = np.load(folder / "offsets.npy")
    return [tokens[a:b].tolist() for a, b in pairwise(offsets)]


def test_documents_plain_and_fim(tmp_path: Path, data_dir: Path, tokenizer: Tokenizer):
    metas = tokenize_corpus(data_dir, tokenizer, tmp_path / "tokens", fim_rate=0.5, seed=3)
    records = list(iter_corpus(data_dir, "train"))
    documents = _documents(tmp_path / "tokens" / "train")
    assert len(documents) == len(records) == metas["train"]["documents"]
    found = find_fim(tokenizer)
    assert found is not None
    sentinels, eos = found[1], 1
    prompts = TextPrompts(tokenizer, chat_stop_ids=())
    fim = 0
    for record, ids in zip(records, documents, strict=True):
        assert ids[-1] == eos and eos not in ids[:-1]
        if ids[0] == sentinels[0]:
            fim += 1
            prefix, middle, suffix = fim_pieces(ids, sentinels, eos)
            pieces = [tokenizer.decode(p) for p in (prefix, middle, suffix)]
            assert "".join(pieces) == record["text"]
            # What serving sends for this hole is exactly the document's start.
            served = prompts.encode(TextPrompt(prefix=pieces[0], suffix=pieces[2])).token_ids
            assert ids[: len(served)] == served
        else:
            assert tokenizer.decode(ids[:-1]) == record["text"]
            assert not set(ids[:-1]) & set(range(len(DEEPSEEK_SPECIAL_TOKENS)))
    assert fim == metas["train"]["fim_documents"]
    assert 0.3 < fim / len(records) < 0.7
    tricky = next(ids for r, ids in zip(records, documents, strict=True) if r["text"] == TRICKY)
    assert max(tricky[:-1]) >= len(DEEPSEEK_SPECIAL_TOKENS)  # sentinel spellings: plain text


def test_fim_rates_and_determinism(tmp_path: Path, data_dir: Path, tokenizer: Tokenizer):
    none = tokenize_corpus(data_dir, tokenizer, tmp_path / "none", fim_rate=0)
    every = tokenize_corpus(data_dir, tokenizer, tmp_path / "all", fim_rate=1)
    assert none["train"]["fim_documents"] == 0
    assert every["train"]["fim_documents"] == every["train"]["documents"]
    tokenize_corpus(data_dir, tokenizer, tmp_path / "again", fim_rate=1)
    for name in ("tokens.bin", "offsets.npy"):
        first = (tmp_path / "all" / "train" / name).read_bytes()
        assert (tmp_path / "again" / "train" / name).read_bytes() == first
    with pytest.raises(TrainingError, match="--fim-rate"):
        tokenize_corpus(data_dir, tokenizer, tmp_path / "bad", fim_rate=2)


def test_interrupted_tokenizing_resumes_to_the_same_tokens(
    tmp_path: Path, data_dir: Path, tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
):
    tokenize_corpus(data_dir, tokenizer, tmp_path / "full")
    monkeypatch.setattr(token_shards, "CHECKPOINT_DOCS", 1)
    monkeypatch.setattr(token_shards, "ENCODE_BATCH", 7)  # so the kill falls mid-stream

    def killed(split: str, documents: int) -> None:
        if documents >= 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tokenize_corpus(data_dir, tokenizer, tmp_path / "resumed", progress=killed)
    assert not (tmp_path / "resumed" / "train" / "meta.json").exists()
    assert (tmp_path / "resumed" / "train" / "checkpoint.json").exists()
    tokenize_corpus(data_dir, tokenizer, tmp_path / "resumed")
    for name in ("tokens.bin", "offsets.npy", "meta.json"):
        first = (tmp_path / "full" / "train" / name).read_bytes()
        assert (tmp_path / "resumed" / "train" / name).read_bytes() == first
