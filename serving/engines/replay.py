"""An engine that answers with recorded generations, in order, as fast as it can stream them.

It re-runs a recorded rollout through the runtime without a model (the trace store keeps every
call's response), and measures the runtime's own cost per step with the model's cost taken
out (`opencomposer bench agent`). It streams like a real backend: reasoning and text in
pieces, then each tool call, then `Finished`.
"""

from collections.abc import AsyncGenerator, Iterable
from dataclasses import replace

from opencomposer.serving.engines.base import (
    EngineEvent,
    Finished,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    Usage,
    Weights,
)
from opencomposer.serving.engines.errors import EngineRequestError

# Characters per streamed piece: about one token.
PIECE = 4


def stream_events(result: GenerationResult, piece: int = PIECE) -> list[EngineEvent]:
    """The events a streaming backend would send for `result`."""
    events: list[EngineEvent] = [
        ReasoningDelta(result.reasoning[i : i + piece])
        for i in range(0, len(result.reasoning), piece)
    ]
    events += [TextDelta(result.text[i : i + piece]) for i in range(0, len(result.text), piece)]
    for index, call in enumerate(result.tool_calls):
        events.append(ToolCallStarted(index, call.id, call.name))
        events.append(ToolCallArgumentsDelta(index, call.arguments))
    events.append(Finished(result))
    return events


class ReplayEngine:
    name = "replay"

    def __init__(
        self,
        results: Iterable[GenerationResult],
        *,
        model: str = "replay",
        context_window: int = 32_768,
    ) -> None:
        self._results = list(results)
        self._next = 0
        self._model = ModelInfo(id=model, context_window=context_window, owned_by="replay")
        self.weights_version: str | None = None

    async def models(self) -> list[ModelInfo]:
        return [self._model]

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        if self._next >= len(self._results):
            raise EngineRequestError(f"the recording has only {len(self._results)} generations")
        result = self._results[self._next]
        self._next += 1
        if result.usage is None:
            prompt = request.prompt_chars() // PIECE
            result = replace(result, usage=Usage(prompt, len(result.text) // PIECE + 1))
        if self.weights_version is not None:
            result = result.with_weights_version(self.weights_version)
        for event in stream_events(result):
            yield event

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        """A recording has no weights to change; later results report `version`, as a real
        engine's would, so a training loop can be run against a replay."""
        self.weights_version = version

    async def aclose(self) -> None:
        return None


class InstantEngine(ReplayEngine):
    """A replay engine that never runs out: every generation is the same answer, streamed at
    once. Benchmarks use it to take the model out of what they measure."""

    MODEL = "instant"

    def __init__(self, answer: str) -> None:
        super().__init__([GenerationResult(text=answer)], model=self.MODEL)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        self._next = 0
        async for event in super().generate(request):
            yield event
