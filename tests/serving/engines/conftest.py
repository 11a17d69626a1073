"""The fake OpenAI-compatible upstream the backend's tests talk to."""

import pytest
from support.fake_openai import FakeOpenAI


@pytest.fixture
async def fake():
    server = FakeOpenAI()
    await server.start()
    yield server
    await server.stop()
