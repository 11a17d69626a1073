"""Exact and near-duplicate removal for the corpus.

Exact: the sha256 of the normalised text. Near: MinHash signatures over 5-word shingles,
indexed by locality-sensitive hashing in bands; a document whose signature collides with a
kept one in any band and whose estimated Jaccard similarity is at least the threshold is a
near-duplicate (vendored copies of a library, a file with its licence header changed).
With 128 permutations in 16 bands of 8 rows, pairs at Jaccard 0.85 collide with probability
1 - (1 - 0.85^8)^16 = 0.9995, pairs at 0.5 with 0.06 (then rejected by the estimate).

The index keeps only signatures (512 bytes a document), so a corpus of 10^5 files costs
tens of MB; signatures are saved beside each shard so a resumed build rebuilds the index
without hashing the kept texts again.
"""

import hashlib
import re
import zlib

import numpy as np

NUM_PERM = 128
BANDS = 16
SHINGLE_WORDS = 5
THRESHOLD = 0.85
_PRIME = np.uint64((1 << 61) - 1)
_MAX32 = np.uint64(0xFFFFFFFF)
_rng = np.random.default_rng(1)
_A = _rng.integers(1, 1 << 32, NUM_PERM, dtype=np.uint64)
_B = _rng.integers(0, 1 << 32, NUM_PERM, dtype=np.uint64)
_WORD = re.compile(r"\w+|[^\w\s]")


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def minhash(text: str) -> np.ndarray:
    """[NUM_PERM] uint32 signature of the text's word shingles (deterministic across runs)."""
    words = _WORD.findall(text)
    span = max(1, len(words) - SHINGLE_WORDS + 1)
    shingles = {" ".join(words[i : i + SHINGLE_WORDS]) for i in range(span)}
    hashes = np.fromiter(
        (zlib.crc32(s.encode("utf-8")) for s in shingles), dtype=np.uint64, count=len(shingles)
    )
    # (a*h + b) mod p on 61-bit arithmetic: a, h < 2^32, so a*h < 2^64 never overflows.
    permuted = ((hashes[:, None] * _A[None, :] + _B[None, :]) % _PRIME) & _MAX32
    return permuted.min(axis=0).astype(np.uint32)


def jaccard_estimate(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a == b))


class Deduplicator:
    """Decides, document by document, whether a text repeats one already kept."""

    def __init__(self) -> None:
        self._exact: set[str] = set()
        self._bands: list[dict[bytes, int]] = [{} for _ in range(BANDS)]
        self._signatures: list[np.ndarray] = []

    def check(self, sha256: str, signature: np.ndarray) -> str | None:
        """ "exact_duplicate", "near_duplicate", or None for a new document (not yet added)."""
        if sha256 in self._exact:
            return "exact_duplicate"
        for band, key in zip(self._bands, _band_keys(signature), strict=True):
            other = band.get(key)
            if other is not None and jaccard_estimate(signature, self._signatures[other]) >= (
                THRESHOLD
            ):
                return "near_duplicate"
        return None

    def add(self, sha256: str, signature: np.ndarray) -> None:
        self._exact.add(sha256)
        index = len(self._signatures)
        self._signatures.append(signature)
        for band, key in zip(self._bands, _band_keys(signature), strict=True):
            band.setdefault(key, index)


def _band_keys(signature: np.ndarray) -> list[bytes]:
    rows = NUM_PERM // BANDS
    return [signature[i * rows : (i + 1) * rows].tobytes() for i in range(BANDS)]
