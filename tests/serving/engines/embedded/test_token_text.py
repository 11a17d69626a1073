"""Token texts for logprobs: every token's exact bytes (the pieces of a character split over
tokens included), its text escaped where the bytes are not whole characters, and the tokens
that end the output left out."""

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from opencomposer.serving.engines.embedded.token_text import TokenTexts
from opencomposer.serving.model_recipes.tiny_moe import train_tokenizer

TEXT = "naïve café: 你好, wörld — 🙂 ok"


def byte_level() -> Tokenizer:
    # Trained on ASCII only: every non-ASCII character is split into single-byte tokens.
    return train_tokenizer(["def add(a, b):\n    return a + b\n"] * 20, vocab_size=300)


def test_the_bytes_of_the_tokens_are_the_text_exactly() -> None:
    tokenizer = byte_level()
    texts = TokenTexts(tokenizer)
    ids = tokenizer.encode(TEXT, add_special_tokens=False).ids
    pieces = [texts.piece(i) for i in ids]
    assert b"".join(raw for _, raw in pieces) == TEXT.encode()
    assert any(len(raw) == 1 and raw[0] >= 0x80 for _, raw in pieces)  # split characters
    for text, raw in pieces:
        assert text == raw.decode("utf-8", "backslashreplace")
    partial = next(text for text, raw in pieces if raw[0] >= 0x80)
    assert partial.startswith("\\x")  # OpenAI's spelling of a piece of a character


def test_added_tokens_are_their_text_and_skipped_tokens_are_left_out() -> None:
    tokenizer = byte_level()
    texts = TokenTexts(tokenizer)
    eos = tokenizer.token_to_id("<｜end▁of▁sentence｜>")
    assert texts.piece(eos) == ("<｜end▁of▁sentence｜>", "<｜end▁of▁sentence｜>".encode())
    ids = [*tokenizer.encode("return a", add_special_tokens=False).ids, eos]
    alternatives = [[(ids[1], -0.5), (ids[0], -1.0)]] * len(ids)
    sampled = texts.sampled(ids, [-0.1] * len(ids), alternatives, skip={eos})
    assert "".join(t.token for t in sampled) == "return a"
    assert [(a.token, a.logprob) for a in sampled[0].top_logprobs] == [
        (texts.piece(ids[1])[0], -0.5),
        (texts.piece(ids[0])[0], -1.0),
    ]
    assert texts.sampled(ids, [-0.1] * len(ids), [], skip={eos})[0].top_logprobs == ()


def test_a_vocabulary_that_is_not_byte_level_gives_the_decoded_text() -> None:
    tokenizer = Tokenizer(models.WordLevel({"hello": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece()
    assert TokenTexts(tokenizer).piece(0) == ("hello", b"hello")
