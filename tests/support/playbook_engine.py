"""A scripted engine for bench runs: each thread plays the playbook its instruction names.

Bench trials run concurrently in one runtime, so a queue of replies would hand one trial's
step to another; here a thread's first user message picks its play (the first whose key it
contains), the number of assistant turns so far picks the step, and what each tool answered is
kept per play, so a test can see what the agent was shown (a hidden folder, an empty history).
"""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from opencomposer.serving.engines.base import (
    EngineEvent,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ToolCall,
    Usage,
)
from opencomposer.serving.engines.replay import stream_events

Step = tuple[str, dict[str, Any]]
"""(tool name, arguments): one tool call, one model turn."""


@dataclass
class PlaybookEngine:
    plays: dict[str, list[Step]]
    """Instruction substring -> the tool calls to make, one per turn, before saying done."""

    usage: Usage = field(default_factory=lambda: Usage(120, 30))
    seen: dict[str, list[str]] = field(default_factory=dict)
    """Play -> the tool results it was shown, in order."""

    name: str = "playbook"

    async def models(self) -> list[ModelInfo]:
        return [ModelInfo(id="playbook-model", context_window=32_768)]

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        instruction = next(str(m.content) for m in request.messages if m.role == "user")
        play = next((key for key in self.plays if key in instruction), None)
        step = sum(message.role == "assistant" for message in request.messages)
        if play is not None:
            shown = self.seen.setdefault(play, [])
            if request.messages[-1].role == "tool":
                shown.append(str(request.messages[-1].content))
        steps = self.plays.get(play, []) if play is not None else []
        if step < len(steps):
            name, arguments = steps[step]
            call = ToolCall(id=f"call_{step}", name=name, arguments=json.dumps(arguments))
            result = GenerationResult(tool_calls=[call], finish_reason="tool_calls")
        else:
            result = GenerationResult(text="Done.", finish_reason="stop")
        result.usage = self.usage
        for event in stream_events(result):
            yield event

    async def aclose(self) -> None:
        return None
