"""Driving the `openai` backend against the fake upstream: an engine with test timeouts and
predictable call ids, and collecting what one generation yields (or how it fails)."""

import asyncio
import itertools
from contextlib import aclosing
from typing import Any

import pytest

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import ChatMessage, EngineEvent, GenerationRequest
from opencomposer.serving.engines.openai import OpenAIEngine
from support.fake_openai import FakeOpenAI

HELLO = GenerationRequest(messages=[ChatMessage(role="user", content="hi")])


def make_engine(fake: FakeOpenAI, **settings: Any) -> OpenAIEngine:
    defaults = {"model": "fake-model", "max_retries": 0, "connect_timeout": 2, "idle_timeout": 2}
    config = EngineSettings(base_url=fake.base_url, **{**defaults, **settings})
    ids = itertools.count()
    return OpenAIEngine(config, new_call_id=lambda: f"gen_{next(ids)}")


async def collect(engine: OpenAIEngine, request: GenerationRequest = HELLO) -> list[EngineEvent]:
    events = []
    async with asyncio.timeout(10), aclosing(engine.generate(request)) as stream:
        async for event in stream:
            events.append(event)
    await engine.aclose()
    return events


async def collect_until_error(
    engine: OpenAIEngine, request: GenerationRequest = HELLO
) -> tuple[list[EngineEvent], BaseException]:
    events = []
    with pytest.raises(Exception) as caught:
        async with asyncio.timeout(10), aclosing(engine.generate(request)) as stream:
            async for event in stream:
                events.append(event)
    await engine.aclose()
    return events, caught.value
