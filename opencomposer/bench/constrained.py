"""What constrained decoding costs a token on the embedded engine: tiny-moe on the CPU, the
same prompt and the same `max_tokens`, greedy, without a constraint and with
`response_format: json_object` (tiny-moe's random weights keep a JSON string open, so both
run to `max_tokens`). Neither speculates, so the difference is the grammar's mask and its
bookkeeping alone. The first run of each warms up (the
model loads, the vocabulary is mapped for the grammar engine); the best of the next
`repeats` counts, as the least disturbed by the other work on a shared machine.
"""

import time
from pathlib import Path

from opencomposer.bench.rows import Row
from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    ChatMessage,
    GenerationRequest,
    ResponseFormat,
    SamplingParams,
    complete,
)
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.model_store import init

MODEL = "tiny-moe"
PROMPT = [ChatMessage(role="user", content="Describe the project's layout as JSON.")]


async def seconds_per_token(engine: EmbeddedEngine, request: GenerationRequest) -> float:
    """Wall time of one generation over the tokens it produced."""
    started = time.perf_counter()
    result = await complete(engine, request)
    elapsed = time.perf_counter() - started
    if result.usage is None or not result.usage.completion_tokens:
        raise RuntimeError("the engine produced no tokens")
    return elapsed / result.usage.completion_tokens


async def constrained_decoding_row(root: Path, *, max_tokens: int = 64, repeats: int = 3) -> Row:
    """The row: seconds per token unconstrained (baseline) and constrained (ours), tiny-moe
    created under `root`."""
    models = root / "models"
    init(MODEL, models)
    settings = EngineSettings(model=MODEL, device="cpu", speculative="none", kv_cache_tokens=1024)
    engine = EmbeddedEngine(settings, models)
    sampling = SamplingParams(temperature=0, max_tokens=max_tokens)
    free = GenerationRequest(messages=PROMPT, sampling=sampling)
    constrained = free.model_copy(update={"response_format": ResponseFormat(type="json_object")})
    try:
        figures: dict[str, list[float]] = {"free": [], "constrained": []}
        for _ in range(repeats + 1):
            figures["free"].append(await seconds_per_token(engine, free))
            figures["constrained"].append(await seconds_per_token(engine, constrained))
    finally:
        await engine.aclose()
    return Row(
        "constrained decoding, per token",
        "unconstrained",
        min(figures["free"][1:]),
        min(figures["constrained"][1:]),
        "s",
        f"{MODEL} on the CPU, greedy, {max_tokens} tokens, json_object; best of {repeats}",
    )
