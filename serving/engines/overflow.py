"""Telling a prompt that did not fit the model's window from other failures, however the
server puts it: an error message in one of many wordings, or, from servers that check the
prompt only once the stream has begun (llama.cpp, llama-cpp-python), a stream that stops
before it starts. The agent compacts its context on `ContextLengthExceeded` and retries; any
other failure it retries as is, which cannot succeed for a prompt that is too long.
"""

import re

from opencomposer.serving.engines.base import GenerationRequest

# Wordings servers use when a prompt does not fit (OpenAI, vLLM, SGLang, llama.cpp's
# "request (N tokens) exceeds the available context size", llama-cpp-python, TGI).
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _]length|context window|maximum context|prompt is too long|too many tokens"
    r"|longer than the model|exceeds? the (?:model'?s )?(?:maximum|max)"
    r"|exceeds? the available context|exceed_context_size",
    re.IGNORECASE,
)

CHARS_PER_TOKEN = 3
"""A low figure for the characters of one token (English prose runs near 4, code and JSON
lower), so that the estimate of a prompt's tokens errs high."""

NEAR_WINDOW = 0.8
"""Share of the window from which a prompt whose stream broke is taken not to have fit."""


def says_overflow(message: str) -> bool:
    """Whether a server's error message says the prompt did not fit."""
    return _CONTEXT_OVERFLOW.search(message) is not None


def estimated_prompt_tokens(request: GenerationRequest) -> int:
    """The prompt's size in tokens, estimated high from its characters (the backend has no
    tokenizer): the conversation or text prompt, and the tools offered."""
    tools = sum(
        len(tool.name) + len(tool.description) + len(str(tool.parameters)) for tool in request.tools
    )
    return (request.prompt_chars() + tools) // CHARS_PER_TOKEN


def near_window(request: GenerationRequest, window: int | None) -> bool:
    """Whether the prompt may not have fit a window of `window` tokens (unknown: no)."""
    return window is not None and estimated_prompt_tokens(request) >= NEAR_WINDOW * window
