"""Constrained decoding: whatever the logits say, a constrained output is what its grammar
allows. Driven by random logits over tiny-moe's vocabulary (seeded), so every test runs
many different paths through the grammar; outputs are checked by an independent JSON
Schema validator and by the tool-call parser the engine streams with."""

import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import torch
from tokenizers import Tokenizer

from opencomposer.agent.tools.registry import default_tools
from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    ChatMessage,
    GenerationRequest,
    GenerationResult,
    ResponseFormat,
    SamplingParams,
    ToolSpec,
    complete,
)
from opencomposer.serving.engines.embedded.chat_format import DEEPSEEK_EOS
from opencomposer.serving.engines.embedded.constrained import (
    ConstraintViolation,
    Grammar,
    GrammarError,
    Grammars,
    request_grammar,
)
from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, Sequence
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.engines.embedded.worker import EngineWorker
from opencomposer.serving.engines.tool_text import (
    DEEPSEEK_V3,
    HERMES,
    KIMI_K2,
    ParsedToolCall,
    ToolTextFormat,
    ToolTextParser,
)
from opencomposer.serving.model_store import init

SEEDS = range(8)
STEPS = 400
REPLY = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["pass", "fail"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 999},
        "files": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    },
    "required": ["verdict", "count", "files"],
    "additionalProperties": False,
}
TOOLS = [
    ToolSpec(
        name="read_file",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string", "maxLength": 16}},
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name="run_tests",
        description="Run the tests.",
        parameters={
            "type": "object",
            "properties": {"verbose": {"type": "boolean"}},
            "required": ["verbose"],
            "additionalProperties": False,
        },
    ),
]
SCHEMAS = {tool.name: tool.parameters for tool in TOOLS}
EOS = frozenset({1})  # tiny-moe's end of sentence (checked in the first test)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    init("tiny-moe", folder)
    return folder


@pytest.fixture(scope="module")
def tokenizer(models: Path) -> Tokenizer:
    return Tokenizer.from_file(str(models / "tiny-moe" / "tokenizer.json"))


@pytest.fixture(scope="module")
def grammars(tokenizer: Tokenizer) -> Grammars:
    eos = tokenizer.token_to_id(DEEPSEEK_EOS)
    return Grammars(tokenizer, tokenizer.get_vocab_size(), [eos])


def random_output(grammar: Grammar, tokenizer: Tokenizer, seed: int) -> str:
    """Text a sequence samples under `grammar` from random logits, until the grammar is
    complete (or a stop token it allows is drawn)."""
    seq = Sequence([0], SamplingOptions(max_tokens=STEPS, grammar=grammar, stop_token_ids=EOS))
    generator = torch.Generator().manual_seed(seed)
    vocab = tokenizer.get_vocab_size()
    while not seq.finished:
        assert seq.constraint is not None
        logits = seq.constraint.mask(torch.randn(vocab, generator=generator) * 4)
        token = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=generator))
        seq.append(token, None)
    assert seq.finish_reason == "stop", "the grammar did not complete within the budget"
    return tokenizer.decode(seq.output_ids, skip_special_tokens=False).removesuffix(DEEPSEEK_EOS)


def calls_in(text: str, fmt: ToolTextFormat) -> list[ParsedToolCall]:
    parser = ToolTextParser((fmt,))
    pieces = parser.feed(text) + parser.finish()
    assert all(isinstance(p, ParsedToolCall) for p in pieces), f"text around the calls: {text!r}"
    return [p for p in pieces if isinstance(p, ParsedToolCall)]


def test_any_logits_give_json_of_the_schema(grammars: Grammars, tokenizer: Tokenizer) -> None:
    assert tokenizer.token_to_id(DEEPSEEK_EOS) in EOS
    grammar = grammars.json_value(REPLY)
    validator = jsonschema_rs.validator_for(REPLY)
    outputs = [json.loads(random_output(grammar, tokenizer, seed)) for seed in SEEDS]
    for output in outputs:
        validator.validate(output)
    assert len({json.dumps(o) for o in outputs}) > 1  # the logits did steer, within the schema


@pytest.mark.parametrize("fmt", [DEEPSEEK_V3, KIMI_K2, HERMES], ids=lambda f: f.name)
def test_a_named_function_is_the_one_called(
    grammars: Grammars, tokenizer: Tokenizer, fmt: ToolTextFormat
) -> None:
    grammar = grammars.tool_calls(fmt, TOOLS, only="read_file")
    for seed in SEEDS:
        (call,) = calls_in(random_output(grammar, tokenizer, seed), fmt)
        assert call.name == "read_file"
        jsonschema_rs.validate(SCHEMAS["read_file"], json.loads(call.arguments))


def takes(grammar: Grammar, tokenizer: Tokenizer, text: str) -> bool:
    """Whether the grammar lets `text`'s tokens through, one by one."""
    constraint = grammar.start()
    try:
        for token in tokenizer.encode(text, add_special_tokens=False).ids:
            constraint.consume(token)
    except ConstraintViolation:
        return False
    return True


@pytest.mark.parametrize("fmt", [DEEPSEEK_V3, KIMI_K2, HERMES], ids=lambda f: f.name)
def test_our_own_tools_compile_together_in_every_syntax(
    grammars: Grammars, fmt: ToolTextFormat
) -> None:
    """`required` over the agent's own 15 tools, two of which refer to their `$defs`."""
    specs = [tool.spec() for tool in default_tools()]
    assert {"edit_file", "todo_write"} <= {s.name for s in specs if "$defs" in s.parameters}
    grammars.tool_calls(fmt, specs)


def test_a_call_is_held_to_the_definitions_its_schema_refers_to(
    grammars: Grammars, tokenizer: Tokenizer
) -> None:
    grammar = grammars.tool_calls(HERMES, [tool.spec() for tool in default_tools()])

    def todo(status: str) -> str:
        arguments = {"todos": [{"content": "Fix add", "status": status}]}
        call = json.dumps({"name": "todo_write", "arguments": arguments})
        return f"<tool_call>\n{call}\n</tool_call>"

    assert takes(grammar, tokenizer, todo("in_progress"))
    assert not takes(grammar, tokenizer, todo("finished"))  # not in the referred enum
    edit = {"path": "a.py", "edits": [{"old_string": "a", "new_string": "b"}]}
    call = json.dumps({"name": "edit_file", "arguments": edit})
    assert takes(grammar, tokenizer, f"<tool_call>\n{call}\n</tool_call>")
    edit["edits"] = [{"old_string": "a"}]  # new_string is required in EditSpec
    call = json.dumps({"name": "edit_file", "arguments": edit})
    assert not takes(grammar, tokenizer, f"<tool_call>\n{call}\n</tool_call>")


def test_required_calls_only_declared_functions(grammars: Grammars, tokenizer: Tokenizer) -> None:
    grammar = grammars.tool_calls(DEEPSEEK_V3, TOOLS)
    names = set()
    for seed in SEEDS:
        calls = calls_in(random_output(grammar, tokenizer, seed), DEEPSEEK_V3)
        assert calls
        for call in calls:
            jsonschema_rs.validate(SCHEMAS[call.name], json.loads(call.arguments))
            names.add(call.name)
    assert names == set(SCHEMAS)


def test_auto_with_json_asked_allows_a_call_or_the_json(
    grammars: Grammars, tokenizer: Tokenizer
) -> None:
    request = GenerationRequest(
        messages=[{"role": "user", "content": "hi"}],
        tools=TOOLS,
        response_format=ResponseFormat(type="json_schema", json_schema=REPLY),
    )
    grammar = request_grammar(grammars, DEEPSEEK_V3, request)
    assert grammar is not None
    kinds = set()
    for seed in range(24):
        output = random_output(grammar, tokenizer, seed)
        if output.startswith(DEEPSEEK_V3.section_begin[0]):
            kinds.add("call")
            assert calls_in(output, DEEPSEEK_V3)
        else:
            kinds.add("json")
            jsonschema_rs.validate(REPLY, json.loads(output))
    assert kinds == {"call", "json"}


@pytest.mark.parametrize(
    ("changes", "constrained"),
    [
        ({}, False),
        ({"tool_choice": "auto"}, False),
        ({"tool_choice": "none"}, False),
        ({"tool_choice": "required"}, True),
        ({"tool_choice": "run_tests"}, True),
        ({"response_format": ResponseFormat(type="json_object")}, True),
    ],
)
def test_only_what_constrains_gets_a_grammar(
    grammars: Grammars, changes: dict[str, Any], constrained: bool
) -> None:
    request = GenerationRequest(messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
    grammar = request_grammar(grammars, DEEPSEEK_V3, request.model_copy(update=changes))
    assert (grammar is not None) == constrained


def test_what_cannot_be_compiled_is_the_requests_fault(grammars: Grammars) -> None:
    with pytest.raises(GrammarError, match="objec"):
        grammars.json_value({"type": "objec"})
    with pytest.raises(GrammarError, match="delete_all"):
        grammars.tool_calls(DEEPSEEK_V3, TOOLS, only="delete_all")
    no_tools = GenerationRequest(
        messages=[{"role": "user", "content": "hi"}], tool_choice="required"
    )
    with pytest.raises(GrammarError, match="needs tools"):
        request_grammar(grammars, DEEPSEEK_V3, no_tools)


async def constrained_results(models: Path, speculative: str) -> list[GenerationResult]:
    settings = EngineSettings(
        model="tiny-moe", device="cpu", kv_cache_tokens=1024, speculative=speculative
    )
    engine = EmbeddedEngine(settings, models)
    hello = [ChatMessage(role="user", content="hello")]
    budget = SamplingParams(temperature=0, max_tokens=48)
    reply = ResponseFormat(type="json_schema", json_schema=REPLY)
    requests = [
        GenerationRequest(messages=hello, tools=TOOLS, tool_choice="run_tests", sampling=budget),
        GenerationRequest(messages=hello, tools=TOOLS, tool_choice="required", sampling=budget),
        GenerationRequest(messages=hello, response_format=reply, sampling=budget),
    ]
    try:
        return [await complete(engine, request) for request in requests]
    finally:
        await engine.aclose()


def produced(result: GenerationResult) -> tuple[str, list[tuple[str, str]]]:
    return result.text, [(call.name, call.arguments) for call in result.tool_calls]


async def test_speculation_under_a_grammar_is_lossless(models: Path) -> None:
    plain = await constrained_results(models, "none")
    drafted = await constrained_results(models, "mtp")
    assert list(map(produced, drafted)) == list(map(produced, plain))
    assert all(r.spec is not None and r.spec.verify_steps > 0 for r in drafted)
    named, _, reply = drafted
    assert [call.name for call in named.tool_calls] == ["run_tests"]
    assert named.finish_reason == "tool_calls"  # the grammar ended it, not the budget
    assert named.usage is not None and named.usage.completion_tokens < 48
    jsonschema_rs.validate(REPLY, json.loads(reply.text))


def test_none_bans_the_tokens_that_open_a_call(grammars: Grammars, tokenizer: Tokenizer) -> None:
    opening = {
        tokenizer.token_to_id(m) for m in (*DEEPSEEK_V3.section_begin, DEEPSEEK_V3.call_begin)
    }
    assert grammars.call_openers(DEEPSEEK_V3) == opening and None not in opening
    assert grammars.call_openers(HERMES) == frozenset()  # `<tool_call>` is text in tiny-moe


async def test_none_reaches_the_engine_as_banned_openers(
    models: Path, grammars: Grammars, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[SamplingOptions] = []
    run = EngineWorker.run

    def recording(worker: EngineWorker, prompt: list[int], options: SamplingOptions):
        seen.append(options)
        return run(worker, prompt, options)

    monkeypatch.setattr(EngineWorker, "run", recording)
    engine = EmbeddedEngine(EngineSettings(model="tiny-moe", device="cpu"), models)
    hello = [ChatMessage(role="user", content="hello")]
    budget = SamplingParams(max_tokens=2)
    try:
        for choice in ("none", "auto"):
            await complete(
                engine,
                GenerationRequest(messages=hello, tools=TOOLS, tool_choice=choice, sampling=budget),
            )
    finally:
        await engine.aclose()
    assert [o.banned_token_ids for o in seen] == [grammars.call_openers(DEEPSEEK_V3), frozenset()]
    assert [o.grammar for o in seen] == [None, None]


@pytest.mark.parametrize(("temperature", "draft_tokens"), [(0, 0), (0, 2), (1.0, 2)])
def test_banned_tokens_are_never_sampled_nor_accepted_as_drafts(
    models: Path, tokenizer: Tokenizer, temperature: float, draft_tokens: int
) -> None:
    engine = LLMEngine(load_model(models / "tiny-moe", mtp=True), EngineConfig(kv_cache_tokens=512))
    allowed = {17, 108}
    options = SamplingOptions(
        temperature=temperature,
        max_tokens=12,
        seed=3,
        draft_tokens=draft_tokens,
        banned_token_ids=frozenset(range(tokenizer.get_vocab_size())) - allowed,
    )
    (seq,) = engine.generate([tokenizer.encode("def main():").ids], options)
    assert len(seq.output_ids) == 12 and set(seq.output_ids) <= allowed
    if draft_tokens:
        assert seq.spec.verify_steps > 0
