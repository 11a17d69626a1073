"""The OpenAI surface over the `openai` backend and a fake llama-cpp-python upstream: model
names it does not list go to the upstream, which alone decides whether it serves them; a
client that does not stream gets the upstream's usage."""

from pathlib import Path

import openai
import pytest
from support.fake_openai import Replay, Status, ThreadedFakeOpenAI, Whole, recorded
from support.live_server import live_server

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.openai import OpenAIEngine

GGUF = "/models/SmolLM2-135M-Instruct-Q8_0.gguf"
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def upstream(tmp_path: Path):
    """A fake llama-cpp-python server, and a client of our server in front of it."""
    with ThreadedFakeOpenAI() as fake:
        fake.models = recorded("llamacpp_python_models")["data"]
        settings = {
            "backend": "openai",
            "base_url": fake.base_url,
            "max_retries": 0,
            "model_aliases": {"smollm2": GGUF},
        }
        engine = OpenAIEngine(EngineSettings(**settings))
        with live_server(engine, tmp_path / "home", engine_settings=settings) as url:
            yield fake, openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_models_lists_the_upstreams_ids_and_the_aliases(upstream):
    _, client = upstream
    # The agent is listed after the upstream's ids and their aliases.
    assert [m.id for m in client.models.list().data] == [GGUF, "smollm2", "opencomposer-agent"]


def test_a_name_the_upstream_does_not_list_is_passed_to_it(upstream):
    fake, client = upstream
    fake.enqueue(Replay("llamacpp_python_text"))
    stream = client.chat.completions.create(model="smollm", messages=HELLO, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "The test passes."
    assert fake.requests[0]["body"]["model"] == "smollm"


def test_a_name_the_upstream_refuses_is_a_404(upstream):
    fake, client = upstream
    fake.enqueue(Status(404, {"error": {"message": "The model `gpt-4o` does not exist."}}))
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="gpt-4o", messages=HELLO)
    assert refused.value.body["code"] == "model_not_found"
    assert "gpt-4o" in refused.value.body["message"]


def test_a_client_that_does_not_stream_gets_the_upstreams_usage(upstream):
    fake, client = upstream
    fake.enqueue(Whole("llamacpp_python_text_reply"))
    reply = client.chat.completions.create(model="smollm2", messages=HELLO)
    assert reply.choices[0].message.content == "calc.py defines add(a, b)."
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (455, 11)
    assert reply.model == "smollm2"
    sent = fake.requests[0]["body"]
    assert (sent["model"], "stream" in sent) == (GGUF, False)


def test_what_the_client_leaves_out_is_left_to_the_upstream(upstream):
    """No temperature means the upstream's default (llama.cpp's is 0.8), not OpenAI's 1.0
    filled in here; one the client sends is passed as sent."""
    fake, client = upstream
    fake.enqueue(Whole("llamacpp_python_text_reply"))
    fake.enqueue(Whole("llamacpp_python_text_reply"))
    client.chat.completions.create(model="smollm2", messages=HELLO)
    client.chat.completions.create(model="smollm2", messages=HELLO, temperature=0.3)
    left_out, sent = (request["body"] for request in fake.requests)
    assert set(left_out) == {"model", "messages"}
    assert sent["temperature"] == 0.3
