"""Text prompts in the embedded engine: raw continuation with no chat template, and
fill-in-the-middle in the model's own sentinel format (tiny-moe carries DeepSeek's; SmolLM2's
tokenizer has none, so it continues the prefix)."""

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    Capture,
    GenerationRequest,
    SamplingParams,
    TextPrompt,
    complete,
)
from opencomposer.serving.engines.embedded.fim import TextPrompts
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.model_store import init

TINY = "tiny-moe"
PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("models")
    init(TINY, directory)
    return directory


@pytest.fixture(scope="module")
def tiny_tokenizer(models_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(str(models_dir / TINY / "tokenizer.json"))


def test_fim_sentinels_surround_separately_encoded_text(tiny_tokenizer: Tokenizer):
    prompts = TextPrompts(tiny_tokenizer, chat_stop_ids=[])
    assert prompts.fim is not None and prompts.fim.prefix == "<｜fim▁begin｜>"
    encoded = prompts.encode(TextPrompt(prefix=PREFIX, suffix=SUFFIX))
    ids = encoded.token_ids
    begin, hole, end = (
        tiny_tokenizer.token_to_id(t)
        for t in ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>")
    )
    assert ids[0] == begin and ids[-1] == end and ids.count(hole) == 1
    middle = ids.index(hole)
    assert tiny_tokenizer.decode(ids[1:middle]) == PREFIX
    assert tiny_tokenizer.decode(ids[middle + 1 : -1]) == SUFFIX
    # The end of the document ends a middle.
    assert tiny_tokenizer.token_to_id("<｜end▁of▁sentence｜>") in encoded.stop_ids


def test_a_sentinel_spelled_in_the_file_is_text_not_a_second_hole(tiny_tokenizer: Tokenizer):
    prompts = TextPrompts(tiny_tokenizer, chat_stop_ids=[])
    hole = tiny_tokenizer.token_to_id("<｜fim▁hole｜>")
    prefix = "x = '<｜fim▁hole｜>'\n"
    ids = prompts.encode(TextPrompt(prefix=prefix, suffix="y = 1\n")).token_ids
    assert ids.count(hole) == 1
    assert tiny_tokenizer.decode(ids[1 : ids.index(hole)], skip_special_tokens=False) == prefix
    raw = prompts.encode(TextPrompt(prefix=prefix)).token_ids
    assert hole not in raw


def test_without_fim_sentinels_a_suffix_is_a_plain_continuation(tmp_path: Path):
    from tokenizers import models, pre_tokenizers

    plain = Tokenizer(models.WordLevel({"<|endoftext|>": 0, "[UNK]": 1, "a": 2}, unk_token="[UNK]"))
    plain.pre_tokenizer = pre_tokenizers.Whitespace()
    plain.add_special_tokens(["<|endoftext|>"])
    prompts = TextPrompts(plain, chat_stop_ids=[7])
    assert prompts.fim is None
    encoded = prompts.encode(TextPrompt(prefix="a a", suffix="a"))
    assert encoded.token_ids == [2, 2]
    # A chat model's end-of-turn stop, and the end of a document.
    assert encoded.stop_ids == {7, 0}


def engine(models_dir: Path) -> EmbeddedEngine:
    return EmbeddedEngine(
        EngineSettings(model=TINY, device="cpu", kv_cache_tokens=2048, speculative="none"),
        models_dir,
    )


def text_request(prefix: str, suffix: str | None = None, max_tokens: int = 6) -> GenerationRequest:
    return GenerationRequest(
        prompt=TextPrompt(prefix=prefix, suffix=suffix),
        sampling=SamplingParams(max_tokens=max_tokens, temperature=0),
        capture=Capture(token_ids=True),
    )


async def test_raw_and_fim_prompts_reach_the_model_as_encoded(
    models_dir: Path, tiny_tokenizer: Tokenizer
):
    served = engine(models_dir)
    try:
        raw = await complete(served, text_request(PREFIX))
        fim = await complete(served, text_request(PREFIX, SUFFIX))
    finally:
        await served.aclose()
    prompts = TextPrompts(tiny_tokenizer, chat_stop_ids=[])
    assert raw.tokens.prompt_token_ids == prompts.encode(TextPrompt(prefix=PREFIX)).token_ids
    assert (
        fim.tokens.prompt_token_ids
        == prompts.encode(TextPrompt(prefix=PREFIX, suffix=SUFFIX)).token_ids
    )
    # No chat template: the prompt holds none of the chat markers.
    user = tiny_tokenizer.token_to_id("<｜User｜>")
    assert user not in raw.tokens.prompt_token_ids
    assert raw.usage.prompt_tokens == len(raw.tokens.prompt_token_ids)
    assert 1 <= raw.usage.completion_tokens <= 6


def test_a_request_has_messages_or_a_prompt_never_both():
    with pytest.raises(ValueError, match="either messages or a text prompt"):
        GenerationRequest()
    with pytest.raises(ValueError, match="either messages or a text prompt"):
        GenerationRequest(
            messages=[{"role": "user", "content": "x"}], prompt=TextPrompt(prefix="x")
        )
    with pytest.raises(ValueError, match="tools need a conversation"):
        GenerationRequest(
            prompt=TextPrompt(prefix="x"),
            tools=[{"name": "t", "description": "", "parameters": {}}],
        )
