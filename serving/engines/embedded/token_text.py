"""Each token's exact bytes and its text, as OpenAI's logprobs show them.

Decoding a token alone (`tokenizer.decode([id])`) is lossy: a byte-level BPE token holding
part of a multi-byte character decodes to U+FFFD. The exact bytes come from the vocabulary
instead: a byte-level vocabulary spells each byte as one printable character (GPT-2's
table), so mapping a token's characters back gives its bytes; added tokens (the chat
format's specials) are their own text. The text shown is those bytes as UTF-8, with any
byte that is not whole-character UTF-8 escaped as `\\xNN`, which is what OpenAI returns for
such tokens.
"""

from collections.abc import Collection, Sequence

from tokenizers import Tokenizer, decoders

from opencomposer.serving.engines.base import SampledToken, TokenLogprob


def _byte_level_table() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character -> byte: printable Latin-1 bytes stand for
    themselves, the other 68 are spelled by the code points from 256 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {chr(b): b for b in printable}
    others = (b for b in range(256) if b not in printable)
    table |= {chr(256 + n): b for n, b in enumerate(others)}
    return table


_BYTE_LEVEL = _byte_level_table()


class TokenTexts:
    """Token id -> (text, exact bytes), looked up once per id."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._byte_level = isinstance(tokenizer.decoder, decoders.ByteLevel)
        self._added = {i: t.content for i, t in tokenizer.get_added_tokens_decoder().items()}
        self._known: dict[int, tuple[str, bytes]] = {}

    def piece(self, token_id: int) -> tuple[str, bytes]:
        known = self._known.get(token_id)
        if known is None:
            raw = self._bytes(token_id)
            known = self._known[token_id] = (raw.decode("utf-8", "backslashreplace"), raw)
        return known

    def _bytes(self, token_id: int) -> bytes:
        if token_id in self._added:
            return self._added[token_id].encode()
        spelled = self._tokenizer.id_to_token(token_id) or ""
        if self._byte_level and all(c in _BYTE_LEVEL for c in spelled):
            return bytes(_BYTE_LEVEL[c] for c in spelled)
        # Not byte-level: the decoder's text is as exact as this vocabulary gets.
        return self._tokenizer.decode([token_id], skip_special_tokens=False).encode()

    def logprob(self, token_id: int, logprob: float) -> TokenLogprob:
        text, raw = self.piece(token_id)
        return TokenLogprob(text, raw, logprob)

    def sampled(
        self,
        token_ids: Sequence[int],
        logprobs: Sequence[float],
        alternatives: Sequence[Sequence[tuple[int, float]]],
        *,
        skip: Collection[int] = (),
    ) -> list[SampledToken]:
        """The output tokens with their alternatives (`alternatives` may be empty: none were
        recorded), leaving out the `skip` tokens, which end the output and add no text."""
        tokens = []
        for i, (token_id, logprob) in enumerate(zip(token_ids, logprobs, strict=False)):
            if token_id in skip:
                continue
            top = alternatives[i] if i < len(alternatives) else ()
            text, raw = self.piece(token_id)
            tokens.append(
                SampledToken(text, raw, logprob, tuple(self.logprob(t, lp) for t, lp in top))
            )
        return tokens
