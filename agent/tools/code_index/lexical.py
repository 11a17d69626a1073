"""Okapi BM25 over code-aware tokens: the search that answers when no embedding model is
installed.

Identifiers are split the way people say them: `parseHTTPResponse2` and `parse_http_response`
both give `parse`, `http`, `response` (plus the whole identifier, so an exact name still
ranks first). The index is inverted (term -> document -> count) and takes documents in and
out one at a time; IDF and the mean length are read at query time, so an update touches only
the changed documents' postings and never needs a rebuild.
"""

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable

# The usual Okapi defaults: k1 saturates repeated terms (a name used ten times is not ten
# times as relevant), b = 0.75 favours short chunks that mention a term over long ones.
K1 = 1.2
B = 0.75

_WORD = re.compile(r"\w+")
# Words inside an identifier, matched on its shape (U upper, l other letter, d digit, _):
# acronyms (HTTP in HTTPServer), Capitalised or lower runs, digits. Matching the shape rather
# than the characters makes it work for any script (`naïveCafé` -> naïve, café).
_PART = re.compile(r"U+(?=Ul)|U?l+|U+|d+")
# Question words that natural-language queries are made of and no identifier needs.
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "do",
        "does",
        "how",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "to",
        "we",
        "what",
        "where",
        "which",
        "who",
        "why",
    }
)


def tokenize(text: str) -> list[str]:
    """Lower-cased tokens: each identifier whole, then its parts when there are several.
    One-character tokens (loop counters) and stopwords are dropped."""
    tokens = []
    for word in _WORD.findall(text):
        shape = "".join(
            "U" if c.isupper() else "d" if c.isdigit() else "_" if c == "_" else "l" for c in word
        )
        parts = [word[m.start() : m.end()].lower() for m in _PART.finditer(shape)]
        whole = word.lower()
        for token in [whole, *parts] if parts != [whole] else [whole]:
            if len(token) > 1 and token not in STOPWORDS:
                tokens.append(token)
    return tokens


class BM25Index:
    def __init__(self, documents: Iterable[tuple[int, str]] = ()) -> None:
        self._postings: dict[str, dict[int, int]] = {}
        self._terms: dict[int, tuple[str, ...]] = {}  # each document's distinct terms
        self._lengths: dict[int, int] = {}
        self._total_length = 0
        for doc_id, text in documents:
            self.add(doc_id, text)

    def add(self, doc_id: int, text: str) -> None:
        """Index a document; an id already present is replaced."""
        self.remove(doc_id)
        tokens = tokenize(text)
        counts = Counter(tokens)
        for term, count in counts.items():
            self._postings.setdefault(term, {})[doc_id] = count
        self._terms[doc_id] = tuple(counts)
        self._lengths[doc_id] = len(tokens)
        self._total_length += len(tokens)

    def remove(self, doc_id: int) -> None:
        """Forget a document; unknown ids are ignored."""
        if doc_id not in self._lengths:
            return
        self._total_length -= self._lengths.pop(doc_id)
        for term in self._terms.pop(doc_id):
            docs = self._postings[term]
            del docs[doc_id]
            if not docs:
                del self._postings[term]

    def search(
        self, query: str, top_k: int, accept: Callable[[int], bool] | None = None
    ) -> list[tuple[int, float]]:
        """The `top_k` best (id, score) pairs, best first, ties by id; `accept` filters ids."""
        if not self._lengths:
            return []
        count = len(self._lengths)
        mean_length = self._total_length / count or 1.0
        scores: dict[int, float] = {}
        for term in set(tokenize(query)):
            docs = self._postings.get(term, {})
            idf = math.log(1 + (count - len(docs) + 0.5) / (len(docs) + 0.5))
            for doc_id, tf in docs.items():
                norm = K1 * (1 - B + B * self._lengths[doc_id] / mean_length)
                scores[doc_id] = scores.get(doc_id, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        candidates = (
            (score, doc_id) for doc_id, score in scores.items() if accept is None or accept(doc_id)
        )
        best = heapq.nsmallest(top_k, candidates, key=lambda pair: (-pair[0], pair[1]))
        return [(doc_id, score) for score, doc_id in best]
