"""The text-protocol tool-call parser: same answer however the text is chunked, nothing lost."""

import random

import pytest

from opencomposer.serving.engines.tool_text import (
    DEEPSEEK_V3,
    HERMES,
    KIMI_K2,
    ParsedText,
    ParsedToolCall,
    ToolTextParser,
)

KIMI = (
    "Plan: a < b.<|tool_calls_section_begin|> <|tool_call_begin|>functions.grep:0"
    '<|tool_call_argument_begin|>{"pattern": "x"}<|tool_call_end|>'
    "<|tool_call_begin|>functions.ls:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
    "<|tool_calls_section_end|>after"
)
DEEPSEEK_V3_TEXT = (
    "ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>grep\n"
    '```json\n{"pattern": "y"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
DEEPSEEK_V31_TEXT = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>grep<｜tool▁sep｜>"
    '{"pattern": "z"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
HERMES_TEXT = 'x<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>y <tool'

CASES = [
    (
        KIMI,
        [
            ParsedText("Plan: a < b."),
            ParsedToolCall("functions.grep:0", "grep", '{"pattern": "x"}'),
            ParsedToolCall("functions.ls:1", "ls", "{}"),
            ParsedText("after"),
        ],
    ),
    (DEEPSEEK_V3_TEXT, [ParsedText("ok"), ParsedToolCall(None, "grep", '{"pattern": "y"}')]),
    (DEEPSEEK_V31_TEXT, [ParsedToolCall(None, "grep", '{"pattern": "z"}')]),
    (
        HERMES_TEXT,
        [
            ParsedText("x"),
            ParsedToolCall(None, "ls", '{"path": "."}'),
            ParsedText("y <tool"),  # a marker prefix left at the end is text
        ],
    ),
    ("no calls <b>here</b> at all", [ParsedText("no calls <b>here</b> at all")]),
]


def parse(chunks: list[str], parser: ToolTextParser | None = None) -> list:
    parser = parser or ToolTextParser()
    out = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    out.extend(parser.finish())
    merged: list = []
    for item in out:  # adjacent text pieces are one text for comparison
        if merged and isinstance(item, ParsedText) and isinstance(merged[-1], ParsedText):
            merged[-1] = ParsedText(merged[-1].text + item.text)
        else:
            merged.append(item)
    return merged


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_every_two_way_split_gives_the_same_result(text, expected):
    assert parse([text]) == expected
    for cut in range(1, len(text)):
        assert parse([text[:cut], text[cut:]]) == expected, cut


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_random_chunkings_give_the_same_result(text, expected):
    rng = random.Random(1234)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(1, 12))))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert parse(chunks) == expected


def test_one_character_at_a_time():
    for text, expected in CASES:
        assert parse(list(text)) == expected


def test_plain_text_is_not_held_back():
    parser = ToolTextParser()
    assert parser.feed("hello ") == [ParsedText("hello ")]
    assert parser.feed("a <") == [ParsedText("a ")]  # "<" may open a marker
    assert parser.feed("b") == [ParsedText("<b")]


def test_unparseable_call_comes_back_as_text():
    text = "<tool_call>{not json}</tool_call>tail"
    assert parse([text]) == [ParsedText(text)]


def test_call_left_open_at_the_end_is_kept():
    parseable = '<tool_call>{"name": "ls", "arguments": {}}'
    assert parse([parseable]) == [ParsedToolCall(None, "ls", "{}")]
    broken = '<tool_call>{"name": "ls", "argum'
    assert parse([broken]) == [ParsedText(broken)]


def test_a_single_format_ignores_the_others():
    parser = ToolTextParser((KIMI_K2,))
    assert parse([HERMES_TEXT], parser) == [ParsedText(HERMES_TEXT)]


def test_every_opening_marker_starts_with_a_less_than_sign():
    # The parser only holds back text from the last "<", which is safe only if this holds.
    for fmt in (KIMI_K2, DEEPSEEK_V3, HERMES):
        assert all(m.startswith("<") for m in (*fmt.section_begin, fmt.call_begin))
