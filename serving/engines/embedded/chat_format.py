"""Conversations -> prompt text, in the format each model was trained on, and the tool-call syntax
to parse its output with (`tool_text`).

Which format a model folder gets (`chat_format_for`):
1. its own Jinja chat template (`chat_template.jinja`, or `chat_template` in
   tokenizer_config.json), rendered like transformers' `apply_chat_template` in a sandbox. A
   template that knows nothing of tools (SmolLM2's: roles and content only) is given the
   conversation in Hermes form, so tools still reach the model;
2. else a built-in format by `model_type`: DeepSeek-V3.1 (`deepseek_v3`; tiny-moe uses it) or
   Kimi K2 (`kimi_k2`), with their own tool declarations and special tokens;
3. else ChatML with Hermes tools: `<tools>` JSON in the system turn, calls as
   `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, results as `<tool_response>`.

Past tool calls and results are written in the format's own syntax, so a multi-step
conversation renders as the model would have produced it, and a prompt rendered with the
generation prompt is a prefix of the same conversation rendered after the reply (the engine
can reuse its KV cache across turns). An assistant's reasoning is not sent back: none of these
formats keeps it in history.
"""

# DeepSeek's markers are spelled with FULLWIDTH VERTICAL LINE on purpose.

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from opencomposer.serving.engines.base import ChatMessage, ToolCall, ToolSpec
from opencomposer.serving.engines.tool_text import DEEPSEEK_V3, HERMES, KIMI_K2, ToolTextFormat

DEEPSEEK_BOS = "<｜begin▁of▁sentence｜>"
DEEPSEEK_EOS = "<｜end▁of▁sentence｜>"
DEEPSEEK_USER = "<｜User｜>"
DEEPSEEK_ASSISTANT = "<｜Assistant｜>"
DEEPSEEK_TOOL_SEP = "<｜tool▁sep｜>"
DEEPSEEK_OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
DEEPSEEK_OUTPUT_END = "<｜tool▁output▁end｜>"
DEEPSEEK_SPECIAL_TOKENS = (
    DEEPSEEK_BOS,
    DEEPSEEK_EOS,
    DEEPSEEK_USER,
    DEEPSEEK_ASSISTANT,
    DEEPSEEK_V3.section_begin[0],
    DEEPSEEK_V3.section_end[0],
    DEEPSEEK_V3.call_begin,
    DEEPSEEK_V3.call_end,
    DEEPSEEK_TOOL_SEP,
    DEEPSEEK_OUTPUT_BEGIN,
    DEEPSEEK_OUTPUT_END,
    "<think>",
    "</think>",
    "<｜fim▁begin｜>",
    "<｜fim▁hole｜>",
    "<｜fim▁end｜>",
)
"""Every marker the DeepSeek format writes, its fill-in-the-middle sentinels included: a
tokenizer for it must keep each one whole."""

KIMI_DEFAULT_SYSTEM = "You are Kimi, an AI assistant created by Moonshot AI."

Render = Callable[[Sequence[ChatMessage], Sequence[ToolSpec]], str]


@dataclass(frozen=True)
class ChatFormat:
    name: str
    render: Render
    """(messages, tools) -> the prompt, ending with the opening of the assistant's turn."""

    tool_format: ToolTextFormat
    """How this format prints tool calls: parse output with `ToolTextParser((tool_format,))`."""

    stop: tuple[str, ...]
    """Texts that end the assistant's turn (special tokens: stop on their ids)."""


# ------------------------------------------------------------------------ Hermes / ChatML


def _arguments_value(call: ToolCall) -> Any:
    """The arguments as JSON data when they parse, else the raw text (kept, never dropped)."""
    try:
        return json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return call.arguments


def _hermes_tools(tools: Sequence[ToolSpec]) -> str:
    declarations = "\n".join(json.dumps(t.to_openai(), ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\nYou may call one or more functions to help with the request. Their "
        f"signatures are in <tools></tools> tags:\n<tools>\n{declarations}\n</tools>\n\n"
        "To call a function, write a JSON object with its name and arguments inside "
        "<tool_call></tool_call> tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def hermes_messages(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
) -> list[dict[str, str]]:
    """The conversation as plain role/content turns, tools declared in the system turn and
    calls and results written in Hermes tags: what a tool-unaware template can render."""
    turns: list[dict[str, str]] = []
    if tools and (not messages or messages[0].role != "system"):
        turns.append({"role": "system", "content": _hermes_tools(tools)})
    for index, message in enumerate(messages):
        content = message.content or ""
        if index == 0 and message.role == "system" and tools:
            content = f"{content}\n\n{_hermes_tools(tools)}" if content else _hermes_tools(tools)
        if message.role == "tool":
            response = f"<tool_response>\n{content}\n</tool_response>"
            if turns and turns[-1]["content"].startswith("<tool_response>"):
                turns[-1]["content"] += "\n" + response  # results of one step share a turn
            else:
                turns.append({"role": "user", "content": response})
            continue
        calls = [
            json.dumps({"name": c.name, "arguments": _arguments_value(c)}, ensure_ascii=False)
            for c in message.tool_calls
        ]
        parts = ([content] if content else []) + [f"<tool_call>\n{c}\n</tool_call>" for c in calls]
        turns.append({"role": message.role, "content": "\n".join(parts)})
    return turns


def _render_chatml(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> str:
    turns = hermes_messages(messages, tools)
    return (
        "".join(f"<|im_start|>{t['role']}\n{t['content']}<|im_end|>\n" for t in turns)
        + "<|im_start|>assistant\n"
    )


CHATML = ChatFormat("chatml", _render_chatml, HERMES, ("<|im_end|>",))

# ------------------------------------------------------------------------ DeepSeek-V3.1


def _deepseek_tools(tools: Sequence[ToolSpec]) -> str:
    listed = "".join(
        f"### {t.name}\nDescription: {t.description}\n\nParameters: "
        f"{json.dumps(t.parameters, ensure_ascii=False)}\n\n"
        for t in tools
    )
    example = (
        f"{DEEPSEEK_V3.section_begin[0]}{DEEPSEEK_V3.call_begin}tool_call_name"
        f"{DEEPSEEK_TOOL_SEP}tool_call_arguments{DEEPSEEK_V3.call_end}"
        f"{{{{additional_tool_calls}}}}{DEEPSEEK_V3.section_end[0]}"
    )
    return (
        "## Tools\nYou have access to the following tools:\n\n"
        + listed
        + "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
        + example
        + "\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the available "
        "tools\n- `tool_call_arguments` must be valid JSON that strictly follows the tool's "
        "Parameters Schema\n- For multiple tool calls, chain them directly without "
        "separators or spaces\n"
    )


def _render_deepseek(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> str:
    """DeepSeek-V3.1 in non-thinking mode: system text first, `</think>` opens each reply, a
    reply after tool results continues without a new assistant marker."""
    system = "\n\n".join(m.content or "" for m in messages if m.role == "system")
    if tools:
        system = f"{system}\n\n{_deepseek_tools(tools)}" if system else _deepseek_tools(tools)
    out, after_user = [DEEPSEEK_BOS, system], False
    for message in messages:
        if message.role == "user":
            out.append(DEEPSEEK_USER + (message.content or ""))
        elif message.role == "tool":
            out.append(DEEPSEEK_OUTPUT_BEGIN + (message.content or "") + DEEPSEEK_OUTPUT_END)
        elif message.role == "assistant":
            if after_user:
                out.append(DEEPSEEK_ASSISTANT + "</think>")
            out.append(message.content or "")
            if message.tool_calls:
                out += [
                    DEEPSEEK_V3.section_begin[0],
                    *(
                        f"{DEEPSEEK_V3.call_begin}{c.name}{DEEPSEEK_TOOL_SEP}{c.arguments}"
                        f"{DEEPSEEK_V3.call_end}"
                        for c in message.tool_calls
                    ),
                    DEEPSEEK_V3.section_end[0],
                ]
            out.append(DEEPSEEK_EOS)
        after_user = message.role == "user" or (after_user and message.role == "system")
    if after_user:
        out.append(DEEPSEEK_ASSISTANT + "</think>")
    return "".join(out)


DEEPSEEK_V3_CHAT = ChatFormat("deepseek_v3", _render_deepseek, DEEPSEEK_V3, (DEEPSEEK_EOS,))

# ------------------------------------------------------------------------ Kimi K2


def kimi_call_ids(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Give every call Kimi's id, `functions.NAME:IDX` (IDX counting calls across the
    conversation): the model reads the function name from it, and results cite it."""
    renamed: dict[str, str] = {}
    out = []
    for message in messages:
        if message.tool_calls:
            calls = []
            for call in message.tool_calls:
                renamed[call.id] = f"functions.{call.name}:{len(renamed)}"
                calls.append(call.model_copy(update={"id": renamed[call.id]}))
            message = message.model_copy(update={"tool_calls": calls})
        elif message.tool_call_id in renamed:
            message = message.model_copy(update={"tool_call_id": renamed[message.tool_call_id]})
        out.append(message)
    return out


def _render_kimi(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> str:
    out = []
    if tools:
        declared = json.dumps(
            [t.to_openai() for t in tools], separators=(",", ":"), ensure_ascii=False
        )
        out.append(f"<|im_system|>tool_declare<|im_middle|>{declared}<|im_end|>")
    if not messages or messages[0].role != "system":
        out.append(f"<|im_system|>system<|im_middle|>{KIMI_DEFAULT_SYSTEM}<|im_end|>")
    for message in kimi_call_ids(messages):
        marker = {"user": "<|im_user|>", "assistant": "<|im_assistant|>"}.get(
            message.role, "<|im_system|>"
        )
        body = message.content or ""
        if message.role == "tool":
            body = f"## Return of {message.tool_call_id}\n{body}"
        if message.tool_calls:
            body += (
                KIMI_K2.section_begin[0]
                + "".join(
                    f"{KIMI_K2.call_begin}{c.id}<|tool_call_argument_begin|>{c.arguments}"
                    f"{KIMI_K2.call_end}"
                    for c in message.tool_calls
                )
                + KIMI_K2.section_end[0]
            )
        out.append(f"{marker}{message.name or message.role}<|im_middle|>{body}<|im_end|>")
    return "".join(out) + "<|im_assistant|>assistant<|im_middle|>"


KIMI_K2_CHAT = ChatFormat("kimi_k2", _render_kimi, KIMI_K2, ("<|im_end|>",))
BUILTIN_FORMATS = {"deepseek_v3": DEEPSEEK_V3_CHAT, "kimi_k2": KIMI_K2_CHAT}

# ------------------------------------------------------------------------ Jinja templates


class _JSONText(str):
    """Arguments as the JSON text the model wrote: concatenated as text by templates that expect
    a string (DeepSeek's), emitted as is by `tojson` in templates that expect an object (Qwen's),
    instead of being quoted into a JSON string."""


def _tojson(
    value: Any,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    if isinstance(value, _JSONText):
        return str(value)
    return json.dumps(
        value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise(message: str) -> None:
    raise TemplateError(message)


_ENV = ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
)
_ENV.filters["tojson"] = _tojson
_ENV.globals["raise_exception"] = _raise
_ENV.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)


def _template_message(message: ChatMessage) -> dict[str, Any]:
    turn = message.to_openai()
    for call in turn.get("tool_calls", []):
        call["function"]["arguments"] = _JSONText(call["function"]["arguments"] or "{}")
    return turn


def template_format(template: str, special_tokens: dict[str, str]) -> ChatFormat:
    """A model's own Jinja chat template; `special_tokens` (bos_token, eos_token, ...) are the
    variables such templates read."""
    compiled = _ENV.from_string(template)
    knows_tools = "tool_calls" in template
    tool_format = HERMES
    if knows_tools and KIMI_K2.call_begin in template:
        tool_format = KIMI_K2
    elif knows_tools and DEEPSEEK_V3.call_begin in template:
        tool_format = DEEPSEEK_V3

    def render(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> str:
        if not knows_tools:
            return compiled.render(
                messages=hermes_messages(messages, tools),
                add_generation_prompt=True,
                **special_tokens,
            )
        if tool_format is KIMI_K2:
            messages = kimi_call_ids(messages)
        return compiled.render(
            messages=[_template_message(m) for m in messages],
            tools=[t.to_openai() for t in tools] or None,
            add_generation_prompt=True,
            **special_tokens,
        )

    eos = special_tokens.get("eos_token")
    return ChatFormat("chat_template", render, tool_format, (eos,) if eos else ())


def chat_format_for(model_dir: Path) -> ChatFormat:
    """The format a model folder's conversations are rendered in (see the module docstring)."""
    tokenizer_config = _read_json(model_dir / "tokenizer_config.json")
    template_file = model_dir / "chat_template.jinja"
    template = (
        template_file.read_text()
        if template_file.is_file()
        else tokenizer_config.get("chat_template")
    )
    if isinstance(template, str):
        special = {}
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            token = tokenizer_config.get(key)
            token = token.get("content") if isinstance(token, dict) else token
            if isinstance(token, str):
                special[key] = token
        return template_format(template, special)
    model_type = _read_json(model_dir / "config.json").get("model_type")
    return BUILTIN_FORMATS.get(model_type, CHATML) if isinstance(model_type, str) else CHATML


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}
