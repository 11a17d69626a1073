"""Constrained decoding: a request's output held to a grammar, token by token.

`tool_choice` `required` or a named function, and `response_format` JSON, are promises about
the output that sampling alone cannot keep. Here each is a grammar (llguidance's Lark dialect,
JSON schemas inlined with `%json`) over the model's own tokenizer: the tool-call syntax of the
model's chat format, with the declared functions' names and parameter schemas, or a JSON
value of the requested schema. Before a constrained sequence samples, its logits lose every
token the grammar cannot take next; the sequence ends as soon as the grammar is complete.

Only constrained sequences pay: a `Grammar` rides on their `SamplingOptions`, and each such
sequence gets its own `Constraint` (the matcher's state). They speculate like any other: MTP
drafts are argmaxes of unmasked logits, so each verification row is masked for the state
after the drafts before it (`mask_drafts`), and a draft the grammar refuses is rejected.
Speculation stays lossless: the output is the one constrained decoding without drafts gives.

`tool_choice: none` needs no grammar: the tokens that open a call are banned (`forbid`, on
every row, so drafts proposing one are rejected and speculation goes on), while the tools
stay in the prompt, which keeps it the prefix the turn's other calls share in the KV cache.

JSON is held to one spacing (`", "` and `": "`, no other whitespace): with free whitespace a
weak model can spend its whole budget on blanks, and this is the spacing the chat formats
write their own examples in.
"""

import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import llguidance
import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from opencomposer.serving.engines.base import GenerationRequest, ToolSpec
from opencomposer.serving.engines.embedded.chat_format import DEEPSEEK_TOOL_SEP
from opencomposer.serving.engines.tool_text import DEEPSEEK_V3, HERMES, KIMI_K2, ToolTextFormat

JSON_SPACING = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
"""llguidance's JSON options for every schema compiled here (see the module docstring)."""

KIMI_ARGUMENTS = "<|tool_call_argument_begin|>"


class GrammarError(ValueError):
    """A schema or grammar llguidance cannot compile: the request's fault."""


class ConstraintViolation(RuntimeError):
    """A token the grammar refused was committed (the mask was not applied): a bug."""


class Grammar:
    """A compiled constraint for one request. The matcher is built here, off the engine's
    thread (a large schema takes a while to compile); each sequence starts from a copy."""

    def __init__(self, tokenizer: llguidance.LLTokenizer, lark: str) -> None:
        text = llguidance.LLMatcher.grammar_from_lark(lark)
        self._matcher = llguidance.LLMatcher(tokenizer, text, log_level=0)
        if self._matcher.is_error():
            raise GrammarError(self._matcher.get_error().strip())

    def start(self) -> "Constraint":
        """A fresh matcher at the start of the output."""
        return Constraint(self._matcher.deep_copy())


class Constraint:
    """One sequence's place in its grammar."""

    def __init__(self, matcher: llguidance.LLMatcher) -> None:
        self._matcher = matcher

    def mask(self, logits: Tensor) -> Tensor:
        """[V] logits with every token the grammar cannot take next at -inf."""
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        allowed = np.unpackbits(bits, bitorder="little")[: logits.shape[-1]].astype(bool)
        if not allowed.any():
            raise ConstraintViolation(f"the grammar allows no token: {self._matcher.get_error()}")
        keep = torch.from_numpy(allowed).to(logits.device)
        return logits.masked_fill(~keep, float("-inf"))

    def mask_drafts(self, logits: Tensor, drafts: list[int]) -> Tensor:
        """[k + 1, V] verification logits, each row masked for the state after the drafts
        before it, so verifying holds the drafts to the grammar (a draft it refuses has
        probability 0 and is rejected). Rows past the first refused draft, which verification
        never reads, stay as they were, as does a row past the grammar's end (the sequence
        ends before its token). The matcher ends where it started."""
        valid = self._matcher.try_consume_tokens(drafts)
        rows = [logits[row] for row in range(logits.shape[0])]
        for row in range(valid, -1, -1):  # the deepest state first, rolling back one by one
            if not self._matcher.is_stopped():  # else the output ends before this row
                rows[row] = self.mask(logits[row])
            if row:
                self._matcher.rollback(1)
        return torch.stack(rows)

    def consume(self, token: int) -> None:
        if not self._matcher.consume_token(token):
            raise ConstraintViolation(
                f"token {token} broke the grammar: {self._matcher.get_error()}"
            )

    @property
    def complete(self) -> bool:
        """The grammar is satisfied and can take nothing more (the output ends here)."""
        return self._matcher.is_stopped()


class Grammars:
    """Compiles requests' constraints for one model. Building llguidance's view of the
    vocabulary costs a pass over it, so it happens on the first constrained request."""

    def __init__(self, tokenizer: Tokenizer, vocab_size: int, stop_ids: Sequence[int]) -> None:
        self._tokenizer = tokenizer
        self._vocab_size = vocab_size
        self._stop_ids = sorted(stop_ids)

    @cached_property
    def _ll_tokenizer(self) -> llguidance.LLTokenizer:
        return llguidance.LLTokenizer(
            self._tokenizer.to_str(),
            n_vocab=self._vocab_size,
            eos_token=self._stop_ids or None,  # None: the tokenizer's own
        )

    def call_openers(self, fmt: ToolTextFormat) -> frozenset[int]:
        """The tokens that open a call in `fmt`, where the tokenizer has its markers as single
        tokens: banned under `tool_choice: none`, the model cannot start a call at all. (A
        marker spelled in several tokens can still be written; it is not parsed then.)"""
        markers = (*fmt.section_begin, fmt.call_begin)
        ids = (self._tokenizer.token_to_id(marker) for marker in markers)
        return frozenset(token for token in ids if token is not None)

    def json_value(self, schema: Mapping[str, Any]) -> Grammar:
        """Output that is one JSON value of `schema` (`{"type": "object"}`: any object)."""
        return Grammar(self._ll_tokenizer, f"start: {_json(schema)}")

    def tool_calls(
        self,
        fmt: ToolTextFormat,
        tools: Sequence[ToolSpec],
        *,
        only: str | None = None,
        or_json: Mapping[str, Any] | None = None,
    ) -> Grammar:
        """Output that is one or more calls, in `fmt`'s syntax, of the declared functions
        with arguments of their parameter schemas; with `only`, exactly one call to it; with
        `or_json`, a JSON value of that schema is the alternative to calling."""
        chosen = [t for t in tools if only is None or t.name == only]
        if not chosen:
            raise GrammarError(f"no declared function is named {only!r}")
        rules = [f"call_{i}: {self._call(fmt, tool)}" for i, tool in enumerate(chosen)]
        call = " | ".join(f"call_{i}" for i in range(len(chosen)))
        repeat = "" if only else "+"
        if fmt.section_begin:
            calls = f"{self._marker(fmt.section_begin[0])} (call){repeat} "
            calls += self._marker(fmt.section_end[0])
        else:
            calls = 'call ("\\n" call)*' if repeat else "call"
        start = f"start: {calls}" + (f" | {_json(or_json)}" if or_json is not None else "")
        return Grammar(self._ll_tokenizer, "\n".join([start, f"call: {call}", *rules]))

    def _call(self, fmt: ToolTextFormat, tool: ToolSpec) -> str:
        begin, end = self._marker(fmt.call_begin), self._marker(fmt.call_end)
        name = _literal(tool.name)
        if fmt is DEEPSEEK_V3:
            body = f"{name} {self._marker(DEEPSEEK_TOOL_SEP)} {_json(tool.parameters)}"
        elif fmt is KIMI_K2:
            head = _literal(f"functions.{tool.name}:")
            body = f"{head} /[0-9]+/ {self._marker(KIMI_ARGUMENTS)} {_json(tool.parameters)}"
        elif fmt is HERMES:
            # The parameters move under `arguments`; the definitions their `$ref`s name
            # (`#/$defs/...`, as pydantic writes them) stay at the schema's root.
            arguments = dict(tool.parameters)
            definitions: dict[str, Any] = {
                k: arguments.pop(k) for k in ("$defs", "definitions") if k in arguments
            }
            call: dict[str, Any] = {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": False,
                **definitions,
            }
            body = f'"\\n" {_json(call)} "\\n"'
        else:
            raise GrammarError(f"no grammar for the {fmt.name} tool-call syntax")
        return f"{begin} {body} {end}"

    def _marker(self, text: str) -> str:
        """A format marker: its token when the tokenizer has it as one token (the model writes
        it so, never as the text's pieces), else the text."""
        token = self._tokenizer.token_to_id(text)
        return f"<[{token}]>" if token is not None else _literal(text)


def forbid(logits: Tensor, tokens: frozenset[int]) -> Tensor:
    """[..., V] logits with `tokens` at -inf."""
    banned = logits.clone()
    banned[..., sorted(tokens)] = float("-inf")
    return banned


def constrains(request: GenerationRequest) -> bool:
    """Whether the request's output is held to a grammar: a call is forced, or JSON asked."""
    forced = request.tool_choice not in (None, "auto", "none")
    return forced or request.response_format is not None


def request_grammar(
    grammars: Grammars, fmt: ToolTextFormat, request: GenerationRequest
) -> Grammar | None:
    """The grammar of what `request` may produce (None: anything). A forced call leaves no
    room for a reply in text, JSON or not; `auto` with tools and JSON asked allows either."""
    choice, tools = request.tool_choice, request.tools
    if choice not in (None, "auto", "none"):
        if not tools:
            raise GrammarError(f"tool_choice {choice!r} needs tools to call")
        return grammars.tool_calls(fmt, tools, only=None if choice == "required" else choice)
    if request.response_format is None:
        return None
    schema = request.response_format.reply_schema()
    if tools and choice != "none":
        return grammars.tool_calls(fmt, tools, or_json=schema)
    return grammars.json_value(schema)


def _json(schema: Mapping[str, Any]) -> str:
    """`schema` as an inline Lark `%json` rule, with this module's JSON spacing."""
    options = {**JSON_SPACING, **schema.get("x-guidance", {})}
    return "%json " + json.dumps({**schema, "x-guidance": options}, ensure_ascii=False)


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
