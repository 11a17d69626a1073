"""`tool_choice` and `response_format` hold on the embedded engine (constrained decoding),
seen through the official `openai` client against a live server running tiny-moe (with its
MTP speculation on): its random weights would answer in text, so every call and every JSON
reply here is the constraint's."""

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema_rs
import openai
import pytest
from support.live_server import live_server

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.embedded.service import EmbeddedEngine

MODEL = "tiny-moe"
HELLO = [{"role": "user", "content": "hello, how are you?"}]
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "maxLength": 24}},
    "required": ["path"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a file.", "parameters": PATH_SCHEMA},
    },
    {
        "type": "function",
        "function": {
            "name": "list_dir",
            "description": "List a folder.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
REPLY = {
    "type": "object",
    "properties": {
        "answer": {"enum": ["yes", "no"]},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, tiny_models_dir: Path
) -> Iterator[openai.OpenAI]:
    settings = EngineSettings(model=MODEL, device="cpu", kv_cache_tokens=2048)
    home = tmp_path_factory.mktemp("constrained")
    with live_server(EmbeddedEngine(settings, tiny_models_dir), home) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def chat(client: openai.OpenAI, max_tokens: int = 96, **arguments):
    return client.chat.completions.create(
        model=MODEL, messages=HELLO, temperature=0, max_tokens=max_tokens, **arguments
    )


def test_a_named_function_is_called_with_arguments_of_its_schema(client) -> None:
    done = chat(
        client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "read_file"}}
    )
    (call,) = done.choices[0].message.tool_calls
    assert call.function.name == "read_file"
    jsonschema_rs.validate(PATH_SCHEMA, json.loads(call.function.arguments))
    assert done.choices[0].finish_reason == "tool_calls"


def test_required_calls_where_the_model_would_answer_in_text(client) -> None:
    free = chat(client, tools=TOOLS)
    assert free.choices[0].message.tool_calls is None and free.choices[0].message.content
    forced = chat(client, tools=TOOLS, tool_choice="required")
    calls = forced.choices[0].message.tool_calls
    assert calls and forced.choices[0].message.content is None
    first = calls[0].function
    jsonschema_rs.validate(SCHEMAS[first.name], json.loads(first.arguments))


def test_a_call_cut_by_max_tokens_says_length_as_at_openai(client) -> None:
    # `required` allows more calls than one: the random model keeps adding them to the cap.
    cut = chat(client, tools=TOOLS, tool_choice="required", max_tokens=24)
    assert cut.choices[0].message.tool_calls  # calls were made, the last of them cut short
    assert cut.choices[0].finish_reason == "length"
    whole = chat(
        client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "list_dir"}}
    )
    assert whole.choices[0].finish_reason == "tool_calls"


def test_a_forced_call_streams_as_tool_call_chunks(client) -> None:
    stream = chat(
        client,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "list_dir"}},
        stream=True,
    )
    names, arguments, finish = [], "", None
    for chunk in stream:
        choice = chunk.choices[0]
        for call in choice.delta.tool_calls or []:
            names += [call.function.name] if call.function.name else []
            arguments += call.function.arguments or ""
        finish = choice.finish_reason or finish
    assert names == ["list_dir"] and json.loads(arguments) == {} and finish == "tool_calls"


def test_json_schema_replies_validate(client) -> None:
    done = chat(
        client,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": REPLY, "strict": True},
        },
    )
    jsonschema_rs.validate(REPLY, json.loads(done.choices[0].message.content))
    assert done.choices[0].finish_reason == "stop"


def test_sampled_json_schema_replies_validate_too(client) -> None:
    verdict = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": REPLY}}
    for seed in range(3):
        done = client.chat.completions.create(
            model=MODEL,
            messages=HELLO,
            temperature=1.0,
            seed=seed,
            max_tokens=96,
            response_format=verdict,
        )
        jsonschema_rs.validate(REPLY, json.loads(done.choices[0].message.content))


def test_json_object_replies_start_as_an_object(client) -> None:
    done = chat(client, response_format={"type": "json_object"}, max_tokens=8)
    assert done.choices[0].message.content.startswith("{")


def test_logprob_alternatives_are_what_the_constraint_allowed(client) -> None:
    """Alternatives come from the masked distribution: at the reply's first token, where the
    schema allows only `{`, every other candidate has no probability at all."""
    verdict = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": REPLY}}
    done = chat(client, response_format=verdict, logprobs=True, top_logprobs=5, max_tokens=24)
    first = done.choices[0].logprobs.content[0]
    assert first.token.startswith("{")
    assert first.top_logprobs[0].token == first.token
    assert all(alt.logprob == -9999.0 for alt in first.top_logprobs[1:] if alt.token != "{")
    jsonschema_rs.validate(REPLY, json.loads(done.choices[0].message.content))


def test_none_gives_no_call_and_keeps_the_prompt(client) -> None:
    offered = chat(client, tools=TOOLS, max_tokens=4)
    withheld = chat(client, tools=TOOLS, tool_choice="none", max_tokens=4)
    assert withheld.choices[0].message.tool_calls is None
    # The tools stay in the prompt, so a summary (`none`) shares the turn's cached prefix.
    assert withheld.usage.prompt_tokens == offered.usage.prompt_tokens


def test_a_schema_that_cannot_be_compiled_is_a_400(client) -> None:
    with pytest.raises(openai.BadRequestError, match="cannot constrain"):
        chat(
            client,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "bad", "schema": {"type": "objec"}},
            },
        )


def test_an_unknown_function_is_still_a_400(client) -> None:
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        chat(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "rm"}})


def test_a_malformed_response_format_is_a_400(client) -> None:
    for bad in ({"type": "xml"}, {"type": "json_schema"}):
        with pytest.raises(openai.BadRequestError, match="response_format"):
            chat(client, response_format=bad)
