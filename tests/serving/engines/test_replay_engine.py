"""The replay engine: recorded generations in order, and the policy version a trainer set."""

from opencomposer.serving.engines.base import (
    ChatMessage,
    GenerationRequest,
    GenerationResult,
    TokenTrace,
    complete,
)
from opencomposer.serving.engines.replay import ReplayEngine

REQUEST = GenerationRequest(messages=[ChatMessage(role="user", content="go")])


async def test_results_report_the_version_of_the_last_update() -> None:
    recorded = [
        GenerationResult(text="one"),
        GenerationResult(text="two", tokens=TokenTrace(completion_token_ids=[5, 6])),
        GenerationResult(text="three"),
    ]
    engine = ReplayEngine(recorded)
    first = await complete(engine, REQUEST)
    assert first.text == "one" and first.tokens is None  # as recorded, before any update
    await engine.update_weights({}, "step-3")
    second = await complete(engine, REQUEST)
    assert second.tokens is not None
    assert (second.tokens.weights_version, second.tokens.completion_token_ids) == ("step-3", [5, 6])
    await engine.update_weights({}, "step-4")
    third = await complete(engine, REQUEST)
    assert third.text == "three" and third.tokens is not None
    assert third.tokens.weights_version == "step-4"
    assert recorded[1].tokens is not None and recorded[1].tokens.weights_version is None
