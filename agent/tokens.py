"""How big the context is, in tokens, without a tokenizer for every model.

The engine's reported usage is the truth for what it has seen: after each call, the prompt
plus the completion is exactly the context up to the assistant message it produced. Only what
was appended since (tool results, new input) is estimated, from its length, with fewer
characters per token than typical text so the estimate errs high and summarization comes
early rather than late. A rebuilt context (after a summary) is estimated whole, corrected by
how the last real count compared with the estimate of the same prompt.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from opencomposer.serving.engines.base import ChatMessage, ToolSpec, Usage

# Code and JSON run at about 3-3.5 characters per token with BPE vocabularies (prose about
# 4); 3 over-estimates slightly, which is the safe side.
CHARS_PER_TOKEN = 3.0
# Role markers and separators a chat template adds around each message.
MESSAGE_OVERHEAD = 4
# Bounds of the learned correction: a server reporting nonsense must not make estimates absurd.
MIN_SCALE, MAX_SCALE = 0.25, 4.0


def estimate_tokens(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> int:
    return _tokens(sum(_message_chars(m) for m in messages) + tool_chars(tools), len(messages))


def tool_chars(tools: Sequence[ToolSpec]) -> int:
    return sum(len(json.dumps(t.to_openai())) for t in tools)


def _tokens(chars: int, messages: int) -> int:
    return int(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD * messages


def _message_chars(message: ChatMessage) -> int:
    size = len(message.content or "") + len(message.reasoning or "")
    return size + sum(len(c.name) + len(c.arguments) for c in message.tool_calls)


@dataclass
class PromptChars:
    """Characters of a prompt that grows by appending, counting only the messages that are
    not the previous prompt's. A step's prompt begins with the very message objects of the
    previous one (`context.PromptView`), so walking back from the end of what was counted to
    the last message found at its place gives the shared prefix (a few messages: the last
    step is rebuilt); a prompt that shares none is counted whole."""

    _counted: Sequence[ChatMessage] = ()
    _upto: list[int] = field(default_factory=list)  # characters of _counted[:n + 1]

    def __call__(self, messages: Sequence[ChatMessage]) -> int:
        shared = min(len(self._counted), len(messages))
        while shared and messages[shared - 1] is not self._counted[shared - 1]:
            shared -= 1
        del self._upto[shared:]
        total = self._upto[-1] if self._upto else 0
        for message in messages[shared:]:
            total += _message_chars(message)
            self._upto.append(total)
        self._counted = messages
        return total


@dataclass
class ContextMeter:
    """Anchors the estimate on the last call's usage while the prompt only grows, and learns
    how the length estimate compares with the engine's real count, to correct estimates of a
    rebuilt context."""

    _anchor_messages: int = 0
    _anchor_tokens: int | None = None
    _anchor_first: ChatMessage | None = None
    _scale: float = 1.0
    _prompt_chars: PromptChars = field(default_factory=PromptChars)

    def observe(self, sent: Sequence[ChatMessage], tool_chars: int, usage: Usage | None) -> None:
        """Record a finished call: `sent` (with tool specs of `tool_chars` characters) plus
        its answer hold `usage` tokens."""
        if usage is None or usage.prompt_tokens <= 0:
            self.reset()
            return
        self._anchor_messages = len(sent) + 1  # the assistant message it produced
        self._anchor_tokens = usage.prompt_tokens + usage.completion_tokens
        self._anchor_first = sent[1] if len(sent) > 1 else None
        raw = _tokens(self._prompt_chars(sent) + tool_chars, len(sent))
        self._scale = min(max(usage.prompt_tokens / raw, MIN_SCALE), MAX_SCALE) if raw else 1.0

    def reset(self) -> None:
        """Forget the anchor: the context was rebuilt (a summary replaced its middle)."""
        self._anchor_tokens = None

    def estimate(self, messages: Sequence[ChatMessage], tool_chars: int) -> int:
        anchored = (
            self._anchor_tokens is not None
            and len(messages) >= self._anchor_messages
            and (messages[1] if len(messages) > 1 else None) == self._anchor_first
        )
        if not anchored:
            return int(
                _tokens(self._prompt_chars(messages) + tool_chars, len(messages)) * self._scale
            )
        assert self._anchor_tokens is not None
        return self._anchor_tokens + estimate_tokens(messages[self._anchor_messages :])


STEP_SHARE_OF_WINDOW = 4
MAX_DERIVED_STEP_TOKENS = 8192
"""The step cap when `agent.max_step_tokens` is unset: a quarter of the window, at most this."""


def step_token_cap(window: int, configured: int | None) -> int:
    """Most tokens one step may generate: the configured cap, else a quarter of the window
    (at most `MAX_DERIVED_STEP_TOKENS`). One answer that fills the window leaves nothing for
    the work after it, and on a small CPU model every token of a ramble is waited for:
    SmolLM2's 8,192-token window gives 2,048."""
    if configured is not None:
        return configured
    return min(MAX_DERIVED_STEP_TOKENS, window // STEP_SHARE_OF_WINDOW)


@dataclass
class ContextWindow:
    """The model's context as a thread's turns see it: its size, the size at which to summarize
    first, the tool specs that take part of it on every call, and the meter. Kept by the
    thread across its turns, so the meter's calibration carries over."""

    size: int
    summary_trigger: int
    tools: list[ToolSpec] = field(default_factory=list)
    meter: ContextMeter = field(default_factory=ContextMeter)

    def __post_init__(self) -> None:
        self._tool_chars = tool_chars(self.tools)  # the same specs on every call

    def estimate(self, messages: Sequence[ChatMessage]) -> int:
        return self.meter.estimate(messages, self._tool_chars)

    def observe(self, sent: Sequence[ChatMessage], usage: Usage | None) -> None:
        self.meter.observe(sent, self._tool_chars, usage)

    def reset(self) -> None:
        """The context was rebuilt (a summary replaced its middle)."""
        self.meter.reset()
