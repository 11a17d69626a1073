"""Fill-in-the-middle documents, laid out exactly as the engine prompts for a completion.

Serving (`serving.engines.embedded.fim.TextPrompts`) sends
`<fim_begin> prefix <fim_hole> suffix <fim_end>` with each piece encoded separately, special
tokens' spellings read as plain text, and the model writes the middle then end of text. So a
training FIM document is that prompt followed by the middle and EOS (prefix-suffix-middle,
"PSM"). The split is two cut points uniform over the document's characters (the FIM paper's
character-level split), drawn from a generator seeded by the document's hash, so a document
gets the same transformation in every run and on every worker.
"""

from collections.abc import Sequence

import numpy as np


def document_rng(seed: int, sha256: str) -> np.random.Generator:
    return np.random.default_rng([seed, int(sha256[:16], 16)])


def fim_split(text: str, rng: np.random.Generator) -> tuple[str, str, str]:
    """(prefix, middle, suffix) of `text` at two random character positions."""
    low, high = sorted(int(x) for x in rng.integers(0, len(text) + 1, size=2))
    return text[:low], text[low:high], text[high:]


def fim_tokens(
    pieces: tuple[Sequence[int], Sequence[int], Sequence[int]],
    sentinels: tuple[int, int, int],
    eos: int,
) -> list[int]:
    """The PSM document of (prefix, middle, suffix) ids, given the sentinels' ids
    (prefix, suffix, middle in `find_fim`'s order)."""
    prefix, middle, suffix = pieces
    begin, hole, end = sentinels
    return [begin, *prefix, hole, *suffix, end, *middle, eos]


def fim_pieces(
    tokens: Sequence[int], sentinels: tuple[int, int, int], eos: int
) -> tuple[list[int], list[int], list[int]]:
    """The inverse of `fim_tokens`: (prefix, middle, suffix) ids of a FIM document."""
    begin, hole, end = sentinels
    ids = list(tokens)
    if not ids or ids[0] != begin or ids[-1] != eos:
        raise ValueError("not a FIM document")
    at_hole, at_end = ids.index(hole), ids.index(end)
    return ids[1:at_hole], ids[at_end + 1 : -1], ids[at_hole + 1 : at_end]


def fim_plan(text: str, sha256: str, *, fim_rate: float, seed: int) -> tuple[str, str, str] | None:
    """The (prefix, middle, suffix) a document becomes, or None when it stays plain text."""
    rng = document_rng(seed, sha256)
    if rng.random() >= fim_rate:
        return None
    return fim_split(text, rng)
