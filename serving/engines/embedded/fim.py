"""Text prompts for the embedded engine: raw continuation and fill-in-the-middle.

Code models learn FIM with three sentinel tokens and a fixed order (prefix, suffix, middle:
"PSM"); each family names its sentinels differently, so the format is found in the model's own
vocabulary rather than configured. The sentinels are placed as token ids around separately
encoded text, as the models were trained, and the text is encoded with special tokens read as
plain characters, so a file that happens to contain a sentinel's spelling cannot move the
hole. A model with no FIM sentinels (SmolLM2's tokenizer has none) continues the prefix, which
is still a useful completion at the end of a line: the LSP completer uses that fallback and
trims what repeats the suffix, while `/v1/completions` refuses a `suffix` such a model cannot
honour (`ModelInfo.fills_middle`).
"""

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from tokenizers import Tokenizer

from opencomposer.serving.engines.base import TextPrompt


@dataclass(frozen=True, slots=True)
class FimFormat:
    prefix: str
    suffix: str
    middle: str
    stops: tuple[str, ...]
    """Tokens that end a middle (a padding or file-separator token), besides end of text."""


FIM_FORMATS = (
    # StarCoder, StarCoder2, SantaCoder.
    FimFormat("<fim_prefix>", "<fim_suffix>", "<fim_middle>", ("<fim_pad>", "<file_sep>")),
    # Qwen2.5-Coder, CodeGemma's spelling with pipes.
    FimFormat(
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        ("<|fim_pad|>", "<|file_sep|>", "<|endoftext|>"),
    ),
    # DeepSeek-Coder, DeepSeek-V3 and the tiny-moe built after it.
    FimFormat("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", ()),
)

END_OF_TEXT = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<｜end▁of▁sentence｜>")
"""Document-end tokens of the common families. A chat model's stop is its end-of-turn marker,
which raw text never prints; the end of a document is what ends a continuation."""


def find_fim(tokenizer: Tokenizer) -> tuple[FimFormat, tuple[int, int, int]] | None:
    """The FIM format whose three sentinels are all in the vocabulary, with their ids (prefix,
    suffix, middle); None for a model that was never taught to fill the middle."""
    token_id = tokenizer.token_to_id
    for fim in FIM_FORMATS:
        prefix, suffix, middle = token_id(fim.prefix), token_id(fim.suffix), token_id(fim.middle)
        if prefix is not None and suffix is not None and middle is not None:
            return fim, (prefix, suffix, middle)
    return None


@dataclass(frozen=True, slots=True)
class EncodedPrompt:
    token_ids: list[int]
    stop_ids: frozenset[int]


class TextPrompts:
    """Encodes text prompts for one tokenizer."""

    def __init__(self, tokenizer: Tokenizer, chat_stop_ids: Collection[int]) -> None:
        self.tokenizer = tokenizer
        # A copy that reads every special token's spelling in the text as plain characters:
        # a raw prompt is text through and through.
        self._text = Tokenizer.from_str(tokenizer.to_str())
        self._text.encode_special_tokens = True
        found = find_fim(tokenizer)
        self.fim: FimFormat | None = found[0] if found else None
        self._sentinels: tuple[int, int, int] | None = found[1] if found else None
        """The ids of `fim`'s prefix, suffix and middle tokens."""
        self.stop_ids = frozenset(chat_stop_ids) | self._ids(END_OF_TEXT)
        self._fim_stop_ids = self._ids(self.fim.stops if self.fim else ())

    def _ids(self, tokens: Iterable[str]) -> frozenset[int]:
        return frozenset(
            token for text in tokens if (token := self.tokenizer.token_to_id(text)) is not None
        )

    def encode(self, prompt: TextPrompt) -> EncodedPrompt:
        """Token ids of the prompt, and the tokens that end its completion."""
        if prompt.suffix is None or self._sentinels is None:
            # The tokenizer's own template adds BOS where the model expects one.
            ids = self._text.encode(prompt.prefix, add_special_tokens=True).ids
            return EncodedPrompt(ids, self.stop_ids)
        prefix, suffix, middle = self._sentinels
        ids = [prefix, *self._plain(prompt.prefix), suffix, *self._plain(prompt.suffix), middle]
        return EncodedPrompt(ids, self.stop_ids | self._fim_stop_ids)

    def _plain(self, text: str) -> list[int]:
        return self._text.encode(text, add_special_tokens=False).ids if text else []
