"""`build_corpus`: sources -> licence-checked, deduplicated, language-tagged JSONL shards.

Layout under `out`:
    corpus/{train,val}/shard-00000.jsonl.zst  one {text, path, repo, license, language, sha256}
                                           per line; `.minhash.npy` beside each (signatures)
    corpus/state.json                      committed shards, finished sources, counts
    manifest.json                          the counts when the build is complete
    sources/                               shallow clones of remote git sources

Streaming: one file in memory at a time, plus the dedup index (signatures only). Resumable:
shards are written under a temporary name and renamed, and the state (which sources are done,
the counts so far) is replaced atomically only after the shards holding those sources' files
are renamed; a shard is closed only between sources. A rerun after a kill drops anything the
state does not list, skips the finished sources and reloads the index from the signatures,
so it produces the same shards as an uninterrupted run.

The held-out split is by repository: a repository's files are all train or all val, by a
hash of its id, so no near-copy of a val file is learned from its neighbours in train.
"""

import copy
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from opencomposer.training.corpus_files import language_of, read_text
from opencomposer.training.corpus_shards import (
    SPLITS,
    CorpusState,
    Counts,
    ShardWriter,
    iter_shard,
)
from opencomposer.training.corpus_sources import Source, list_files
from opencomposer.training.dedup import Deduplicator, minhash, text_sha256
from opencomposer.training.errors import TrainingError
from opencomposer.training.licenses import LicenseResolver, is_license_file, is_permissive

SHARD_BYTES = 32 << 20
"""A shard is closed at the first source boundary past this size (32 MB of JSON)."""


@dataclass(frozen=True)
class Budget:
    """CPU-sized limits. The defaults keep `train data` with no sources to a few minutes on
    two cores (the stdlib and this venv's site-packages; see the README for measurements)."""

    max_files: int | None = None
    """Files kept in all, then the build stops."""
    max_bytes: int | None = 256 << 20
    """Bytes of text kept in all, then the build stops."""
    max_repo_bytes: int | None = 4 << 20
    """Bytes kept from one repository: torch alone would otherwise be a third of the corpus."""
    max_file_bytes: int = 256 << 10
    """Larger files are mostly generated (tables, bundles, vendored data) and are skipped."""


def split_of(repo: str, val_fraction: float) -> str:
    digest = int.from_bytes(hashlib.sha256(repo.encode("utf-8")).digest()[:8], "big")
    return "val" if digest / 2**64 < val_fraction else "train"


def build_corpus(
    sources: Sequence[Source],
    out: Path,
    *,
    val_fraction: float = 0.05,
    budget: Budget = Budget(),
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Build (or finish building) the corpus under `out`; returns the manifest. `progress` is
    called with (source id, files seen so far) as the build goes."""
    if not 0 <= val_fraction < 1:
        raise TrainingError(f"--val-fraction {val_fraction} must be in [0, 1)")
    corpus = out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    state = CorpusState(corpus / "state.json")
    if state.val_fraction is not None and state.val_fraction != val_fraction:
        # Finished sources were split with the old fraction; mixing two would leak repositories.
        raise TrainingError(
            f"{out} holds a corpus split with --val-fraction {state.val_fraction}: "
            "rerun with that value or use a new --out"
        )
    state.val_fraction = val_fraction
    _drop_uncommitted(corpus, state)
    dedup = _reload_index(corpus, state)
    counts = copy.deepcopy(state.counts)
    writers = {s: ShardWriter(corpus / s, len(state.shards[s])) for s in SPLITS}
    pending: list[str] = []

    def commit() -> None:
        for split, writer in writers.items():
            if name := writer.commit():
                state.shards[split].append(name)
        state.finished += pending
        state.counts = copy.deepcopy(counts)
        state.save()
        pending.clear()

    for source in sources:
        if source.repo in state.finished:
            continue
        if _spent(counts, budget):
            break
        split = split_of(source.repo, val_fraction)
        _add_source(source, writers[split], split, dedup, counts, budget, progress)
        pending.append(source.repo)
        if max(w.size for w in writers.values()) >= SHARD_BYTES:
            commit()
    state.complete = True
    commit()
    if counts.kept == 0:
        raise TrainingError(
            f"the corpus is empty: no permissively licensed text file in {len(sources)} "
            f"source(s) ({_reasons(counts)}); give folders or repositories of code"
        )
    manifest = {
        "sources": state.finished,
        "val_fraction": val_fraction,
        "shards": state.shards,
        **counts.to_json(),
    }
    temporary = out / "manifest.json.tmp"
    temporary.write_text(json.dumps(manifest, indent=2) + "\n")
    temporary.rename(out / "manifest.json")
    return manifest


def _add_source(
    source: Source,
    writer: ShardWriter,
    split: str,
    dedup: Deduplicator,
    counts: Counts,
    budget: Budget,
    progress: Callable[[str, int], None] | None,
) -> None:
    licenses = LicenseResolver(
        source.root,
        source.license,
        walk=source.walk_licenses,
        include_root=source.record is None,
    )
    repo_bytes = 0
    for path in list_files(source):
        if _spent(counts, budget):
            return
        counts.seen += 1
        if progress is not None:
            progress(source.repo, counts.seen)
        if budget.max_repo_bytes is not None and repo_bytes >= budget.max_repo_bytes:
            counts.skipped["repository_budget"] += 1
            continue
        reason, record, signature = _examine(path, source, licenses, dedup, counts, budget)
        if reason:
            counts.skipped[reason] += 1
            continue
        assert record is not None and signature is not None
        dedup.add(record["sha256"], signature)
        writer.write(record, signature)
        size = len(record["text"].encode("utf-8"))
        repo_bytes += size
        counts.kept += 1
        counts.bytes_kept += size
        counts.licenses[record["license"]] += 1
        counts.languages[record["language"]] += 1
        counts.splits[split]["files"] += 1
        counts.splits[split]["bytes"] += size
    counts.splits[split]["repositories"] += 1


def _examine(
    path: Path,
    source: Source,
    licenses: LicenseResolver,
    dedup: Deduplicator,
    counts: Counts,
    budget: Budget,
) -> tuple[str, dict[str, str] | None, np.ndarray | None]:
    """(skip reason, record, signature): a reason, or the record to keep."""
    language = language_of(path)
    if language is None or is_license_file(path.name):
        return "unsupported_type", None, None
    text, reason, size = read_text(path, budget.max_file_bytes)
    counts.bytes_seen += size
    if text is None:
        return reason, None, None
    spdx = licenses.license_of(path, text)
    if spdx is None:
        return "license_unknown", None, None
    if not is_permissive(spdx):
        return "license_not_permissive", None, None
    sha = text_sha256(text)
    signature = minhash(text)
    if duplicate := dedup.check(sha, signature):
        return duplicate, None, None
    record = {
        "text": text,
        "path": path.relative_to(source.root).as_posix(),
        "repo": source.repo,
        "license": spdx,
        "language": language,
        "sha256": sha,
    }
    return "", record, signature


def _spent(counts: Counts, budget: Budget) -> bool:
    return bool(
        (budget.max_files is not None and counts.kept >= budget.max_files)
        or (budget.max_bytes is not None and counts.bytes_kept >= budget.max_bytes)
    )


def _reasons(counts: Counts) -> str:
    if not counts.seen:
        return "no files found"
    return ", ".join(f"{n} {reason}" for reason, n in counts.skipped.most_common())


def _drop_uncommitted(corpus: Path, state: CorpusState) -> None:
    """Delete what a killed run left that the state does not list (a shard being written, or
    one renamed just before the kill, whose sources will be redone)."""
    for split in SPLITS:
        keep = set(state.shards[split])
        keep |= {name + ".minhash.npy" for name in state.shards[split]}
        for path in (corpus / split).glob("*") if (corpus / split).is_dir() else ():
            if path.name not in keep:
                path.unlink()


def _reload_index(corpus: Path, state: CorpusState) -> Deduplicator:
    dedup = Deduplicator()
    for split in SPLITS:
        for name in state.shards[split]:
            signatures = np.load(corpus / split / (name + ".minhash.npy"))
            records = iter_shard(corpus / split / name)
            for record, signature in zip(records, signatures, strict=True):
                dedup.add(record["sha256"], signature)
    return dedup


def iter_corpus(corpus_dir: Path, split: str) -> Iterator[dict[str, Any]]:
    """Every record of a split of a corpus that `build_corpus` completed, in shard order."""
    state_file = corpus_dir / "corpus" / "state.json"
    if not state_file.is_file():
        raise TrainingError(f"{corpus_dir} holds no corpus: run `opencomposer train data` first")
    state = CorpusState(state_file)
    if not state.complete:
        raise TrainingError(f"the corpus in {corpus_dir} is unfinished: rerun `train data`")
    for name in state.shards[split]:
        yield from iter_shard(corpus_dir / "corpus" / split / name)
