"""A non-streamed reply (`chat.completion` or `text_completion`) in the shape of one stream
chunk that carries all of it, so that one assembler reads both: native and printed tool
calls, reasoning, logprobs, server extras and usage are understood the same way.
"""

from typing import Any

from opencomposer.serving.engines.errors import EngineProtocolError


def as_chunk(reply: Any) -> Any:
    """The reply with each chat choice's `message` as its `delta`, tool calls indexed as in
    a stream; a text completion's choices already carry `text` as its chunks do. Anything
    that is not a dict is left for the assembler to reject."""
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        return reply
    return {**reply, "choices": [_choice(choice) for choice in reply["choices"]]}


def _choice(choice: Any) -> Any:
    if not isinstance(choice, dict) or "message" not in choice:
        return choice
    message = choice["message"]
    if not isinstance(message, dict):
        raise EngineProtocolError(f"malformed reply from the server: message is {message!r}")
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        calls = [
            {"index": n, **call} if isinstance(call, dict) else call for n, call in enumerate(calls)
        ]
    rest = {key: value for key, value in choice.items() if key != "message"}
    return {**rest, "delta": {**message, "tool_calls": calls}}
