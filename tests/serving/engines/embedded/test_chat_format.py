"""Prompt rendering per model format, and tool calls that survive render -> tool_text parse."""

# DeepSeek's markers are spelled with FULLWIDTH VERTICAL LINE on purpose.

import json
from pathlib import Path

import pytest
from jinja2.exceptions import SecurityError, TemplateError

from opencomposer.serving.engines.base import ChatMessage, ToolCall, ToolSpec
from opencomposer.serving.engines.embedded.chat_format import (
    CHATML,
    DEEPSEEK_SPECIAL_TOKENS,
    DEEPSEEK_V3_CHAT,
    KIMI_K2_CHAT,
    ChatFormat,
    chat_format_for,
    template_format,
)
from opencomposer.serving.engines.tool_text import (
    DEEPSEEK_V3,
    HERMES,
    KIMI_K2,
    ParsedToolCall,
    ToolTextParser,
)

TOOLS = [
    ToolSpec(
        name="read_file",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
]
CALLS = [
    ToolCall(id="call_a", name="read_file", arguments='{"path": "a.py"}'),
    ToolCall(id="call_b", name="read_file", arguments='{"path": "dir/b ü.py"}'),
]
USER = ChatMessage(role="user", content="Show a.py")
REPLY = ChatMessage(role="assistant", content="Reading.", tool_calls=CALLS)

# A template like SmolLM2's: roles and content, nothing about tools.
PLAIN_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# A tool-aware Hermes template that wants the arguments as an object (Qwen's convention).
HERMES_TEMPLATE = """{% if tools %}<|im_start|>system
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}<|im_end|>
{% endif %}
{% for message in messages %}
{% if message.tool_calls %}<|im_start|>assistant
{% for call in message.tool_calls %}<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>{{ message.content }}</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{% endfor %}
{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
# DeepSeek's convention: the arguments concatenated as a string.
DEEPSEEK_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}<｜User｜>{{ m.content }}"
    "{% elif m.tool_calls %}<｜Assistant｜><｜tool▁calls▁begin｜>{% for c in m.tool_calls %}"
    "{{ '<｜tool▁call▁begin｜>' + c.function.name + '<｜tool▁sep｜>' + c.function.arguments"
    " + '<｜tool▁call▁end｜>' }}{% endfor %}<｜tool▁calls▁end｜>{{ eos_token }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<｜Assistant｜>{% endif %}"
)
# Kimi's: calls cited by id.
KIMI_TEMPLATE = (
    "{% for m in messages %}{% if m.tool_calls %}<|im_assistant|>assistant<|im_middle|>"
    "<|tool_calls_section_begin|>{% for c in m.tool_calls %}<|tool_call_begin|>{{ c.id }}"
    "<|tool_call_argument_begin|>{{ c.function.arguments }}<|tool_call_end|>{% endfor %}"
    "<|tool_calls_section_end|><|im_end|>{% else %}<|im_user|>user<|im_middle|>{{ m.content }}"
    "<|im_end|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_assistant|>assistant<|im_middle|>{% endif %}"
)

FORMATS = {
    "chatml": CHATML,
    "deepseek_v3": DEEPSEEK_V3_CHAT,
    "kimi_k2": KIMI_K2_CHAT,
    "template_without_tools": template_format(PLAIN_CHATML, {"eos_token": "<|im_end|>"}),
    "hermes_template": template_format(HERMES_TEMPLATE, {}),
    "deepseek_template": template_format(
        DEEPSEEK_TEMPLATE,
        {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    ),
    "kimi_template": template_format(KIMI_TEMPLATE, {}),
}


def parse(fmt: ChatFormat, text: str) -> list[ParsedToolCall]:
    """What the engine does with a completion: stream it, 3 characters at a time, through
    tool_text with the format's own syntax."""
    parser = ToolTextParser((fmt.tool_format,))
    items = [item for i in range(0, len(text), 3) for item in parser.feed(text[i : i + 3])]
    return [item for item in items + parser.finish() if isinstance(item, ParsedToolCall)]


@pytest.mark.parametrize("name", FORMATS)
def test_a_rendered_tool_call_parses_back_with_tool_text(name: str):
    fmt = FORMATS[name]
    prompt = fmt.render([USER], TOOLS)
    history = fmt.render([USER, REPLY], TOOLS)
    # The prompt is a prefix of the conversation with the reply: what the model would have
    # had to write is exactly the rest.
    assert history.startswith(prompt)
    calls = parse(fmt, history[len(prompt) :])
    assert [c.name for c in calls] == ["read_file", "read_file"]
    assert [json.loads(c.arguments) for c in calls] == [{"path": "a.py"}, {"path": "dir/b ü.py"}]
    if fmt.tool_format is KIMI_K2:
        assert [c.id for c in calls] == ["functions.read_file:0", "functions.read_file:1"]


def test_each_source_picks_its_tool_syntax_and_stop():
    assert [FORMATS[n].tool_format for n in FORMATS] == [
        HERMES,
        DEEPSEEK_V3,
        KIMI_K2,
        HERMES,
        HERMES,
        DEEPSEEK_V3,
        KIMI_K2,
    ]
    assert (
        CHATML.stop
        == KIMI_K2_CHAT.stop
        == FORMATS["template_without_tools"].stop
        == ("<|im_end|>",)
    )
    assert DEEPSEEK_V3_CHAT.stop == ("<｜end▁of▁sentence｜>",)
    assert FORMATS["hermes_template"].stop == ()


def test_a_tool_unaware_template_gets_the_hermes_conversation():
    conversation = [
        ChatMessage(role="system", content="Be brief."),
        USER,
        REPLY,
        ChatMessage(role="tool", tool_call_id="call_a", content="print(1)"),
        ChatMessage(role="tool", tool_call_id="call_b", content="x = 2"),
    ]
    rendered = FORMATS["template_without_tools"].render(conversation, TOOLS)
    assert rendered == CHATML.render(conversation, TOOLS)
    assert rendered.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert '<tools>\n{"type": "function", "function": {"name": "read_file"' in rendered
    # Both results of the step go back in one user turn.
    assert rendered.endswith(
        "<|im_start|>user\n<tool_response>\nprint(1)\n</tool_response>\n<tool_response>\nx = 2"
        "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_chatml_without_tools_is_plain_chatml():
    assert CHATML.render([USER], []) == (
        "<|im_start|>user\nShow a.py<|im_end|>\n<|im_start|>assistant\n"
    )
    assert CHATML.render([USER], TOOLS).startswith("<|im_start|>system\n# Tools\n")


def test_arguments_that_are_not_json_are_kept_as_text():
    broken = ChatMessage(
        role="assistant", tool_calls=[ToolCall(id="x", name="read_file", arguments="{not json")]
    )
    prompt = CHATML.render([USER], [])
    calls = parse(CHATML, CHATML.render([USER, broken], [])[len(prompt) :])
    assert [(c.name, c.arguments) for c in calls] == [("read_file", "{not json")]


def test_deepseek_v3_renders_the_v31_layout():
    conversation = [
        ChatMessage(role="system", content="Be brief."),
        USER,
        REPLY,
        ChatMessage(role="tool", tool_call_id="call_a", content="print(1)"),
        ChatMessage(role="tool", tool_call_id="call_b", content="x = 2"),
        ChatMessage(role="assistant", content="Done."),
        ChatMessage(role="user", content="Thanks"),
    ]
    rendered = DEEPSEEK_V3_CHAT.render(conversation, TOOLS)
    head, _, tail = rendered.partition("<｜User｜>")
    assert head.startswith(
        "<｜begin▁of▁sentence｜>Be brief.\n\n## Tools\nYou have access to "
        "the following tools:\n\n### read_file\nDescription: Read a file\n\n"
        'Parameters: {"type": "object", '
    )
    assert tail == (
        "Show a.py<｜Assistant｜></think>Reading.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
        'read_file<｜tool▁sep｜>{"path": "a.py"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>'
        'read_file<｜tool▁sep｜>{"path": "dir/b ü.py"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
        "<｜end▁of▁sentence｜><｜tool▁output▁begin｜>print(1)<｜tool▁output▁end｜>"
        "<｜tool▁output▁begin｜>x = 2<｜tool▁output▁end｜>Done.<｜end▁of▁sentence｜>"
        "<｜User｜>Thanks<｜Assistant｜></think>"
    )
    # After tool results the model continues its own turn: no new assistant marker.
    assert DEEPSEEK_V3_CHAT.render(conversation[:4], []).endswith("<｜tool▁output▁end｜>")
    assert set(DEEPSEEK_SPECIAL_TOKENS) >= {DEEPSEEK_V3.call_begin, *DEEPSEEK_V3.section_begin}


def test_kimi_k2_renders_declaration_ids_and_returns():
    conversation = [USER, REPLY, ChatMessage(role="tool", tool_call_id="call_b", content="x")]
    assert KIMI_K2_CHAT.render(conversation, TOOLS) == (
        '<|im_system|>tool_declare<|im_middle|>[{"type":"function","function":{"name":'
        '"read_file","description":"Read a file","parameters":{"type":"object","properties":'
        '{"path":{"type":"string"}}}}}]<|im_end|>'
        "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI."
        "<|im_end|><|im_user|>user<|im_middle|>Show a.py<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>Reading.<|tool_calls_section_begin|>"
        '<|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>{"path": "a.py"}'
        "<|tool_call_end|><|tool_call_begin|>functions.read_file:1<|tool_call_argument_begin|>"
        '{"path": "dir/b ü.py"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>'
        "<|im_system|>tool<|im_middle|>## Return of functions.read_file:1\nx<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>"
    )
    system = ChatMessage(role="system", content="Own prompt.")
    assert KIMI_K2_CHAT.render([system, USER], []).startswith(
        "<|im_system|>system<|im_middle|>Own prompt.<|im_end|><|im_user|>"
    )


def test_templates_get_tools_and_arguments_in_the_shape_they_use():
    rendered = FORMATS["hermes_template"].render([USER, REPLY], TOOLS)
    assert rendered.startswith('<|im_start|>system\n{"type": "function", "function": ')
    assert '"arguments": {"path": "a.py"}}' in rendered  # an object, not a quoted string
    assert "<tool_call>" not in FORMATS["hermes_template"].render([USER], TOOLS)


def test_templates_run_sandboxed():
    with pytest.raises(SecurityError):
        template_format("{{ ''.__class__.__mro__[1].__subclasses__() }}", {}).render([USER], [])
    with pytest.raises(TemplateError, match="no tools here"):
        template_format("{{ raise_exception('no tools here') }}", {}).render([USER], [])


def write(folder: Path, **files: str | dict) -> Path:
    folder.mkdir()
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (folder / name.replace("__", ".")).write_text(text)
    return folder


def test_chat_format_for_prefers_the_models_own_template(tmp_path: Path):
    own = write(
        tmp_path / "own",
        chat_template__jinja=PLAIN_CHATML,
        config__json={"model_type": "deepseek_v3"},
        tokenizer_config__json={"eos_token": {"content": "<|im_end|>"}},
    )
    fmt = chat_format_for(own)
    assert (fmt.name, fmt.stop) == ("chat_template", ("<|im_end|>",))
    legacy = write(
        tmp_path / "legacy",
        tokenizer_config__json={
            "chat_template": DEEPSEEK_TEMPLATE,
            "bos_token": "<B>",
            "eos_token": "<E>",
        },
    )
    assert chat_format_for(legacy).render([USER], []) == "<B><｜User｜>Show a.py<｜Assistant｜>"


@pytest.mark.parametrize(
    ("model_type", "expected"),
    [("deepseek_v3", DEEPSEEK_V3_CHAT), ("kimi_k2", KIMI_K2_CHAT), ("llama", CHATML)],
)
def test_chat_format_for_falls_back_by_model_type(
    tmp_path: Path, model_type: str, expected: ChatFormat
):
    folder = write(tmp_path / model_type, config__json={"model_type": model_type})
    assert chat_format_for(folder) is expected
