"""/metrics: requests by route template, tokens from the engine, running turns."""

from pathlib import Path

import httpx
from support.live_server import live_server
from support.scripted_engine import Reply, ScriptedEngine


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition text (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    prefix = f"{name}{{{wanted}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_requests_tokens_and_turns(tmp_path: Path) -> None:
    engine = ScriptedEngine([Reply(text="hi", usage=(12, 3)), Reply(text="done", usage=(20, 5))])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with live_server(engine, tmp_path / "home") as url:
        chat = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "scripted-model", "messages": [{"role": "user", "content": "hello"}]},
        )
        assert chat.status_code == 200
        thread = httpx.post(f"{url}/v1/threads", json={"workspace": str(workspace)}).json()
        thread_id = thread["thread"]["id"]
        with httpx.stream(
            "POST",
            f"{url}/v1/threads/{thread_id}/turns",
            json={"input": [{"type": "text", "text": "go"}]},
        ) as turn:
            assert "turn.completed" in turn.read().decode()
        httpx.get(f"{url}/v1/threads/{thread_id}")
        text = httpx.get(f"{url}/metrics").text
    assert (
        sample(
            text,
            "opencomposer_http_requests_total",
            method="POST",
            route="/v1/chat/completions",
            status="200",
        )
        == 1
    )
    # Thread ids do not become labels: the route template does.
    assert (
        sample(
            text,
            "opencomposer_http_requests_total",
            method="GET",
            route="/v1/threads/{thread_id}",
            status="200",
        )
        == 1
    )
    assert sample(text, "opencomposer_model_tokens_total", kind="prompt") == 32
    assert sample(text, "opencomposer_model_tokens_total", kind="completion") == 8
    assert sample(text, "opencomposer_model_generations_total", finish_reason="stop") == 2
    assert sample(text, "opencomposer_agent_active_turns") == 0
    assert (
        'opencomposer_http_request_seconds_bucket{le="+Inf",route="/v1/chat/completions"}' in text
    )


async def test_speculative_decoding_is_counted() -> None:
    from opencomposer.serving.engines.base import (
        ChatMessage,
        GenerationRequest,
        GenerationResult,
        SpecDecodeStats,
        Usage,
        complete,
    )
    from opencomposer.serving.engines.replay import ReplayEngine
    from opencomposer.serving.http.metrics import MeteredEngine, ServerMetrics

    metrics = ServerMetrics()
    result = GenerationResult(
        text="abc",
        usage=Usage(5, 9),
        spec=SpecDecodeStats(verify_steps=4, accept_length=2.25, accept_rate=5 / 12, drafted=12),
    )
    engine = MeteredEngine(ReplayEngine([result]), metrics)
    await complete(engine, GenerationRequest(messages=[ChatMessage(role="user", content="x")]))
    text = metrics.render().decode()
    assert sample(text, "opencomposer_spec_verify_steps_total") == 4
    assert sample(text, "opencomposer_spec_accepted_tokens_total") == 5
    assert sample(text, "opencomposer_spec_drafted_tokens_total") == 12


def test_every_response_carries_a_request_id(tmp_path: Path) -> None:
    with live_server(ScriptedEngine([]), tmp_path / "home") as url:
        fresh = httpx.get(f"{url}/healthz").headers["x-request-id"]
        kept = httpx.get(f"{url}/healthz", headers={"X-Request-Id": "trace-42"})
        replaced = httpx.get(f"{url}/healthz", headers={"X-Request-Id": "no spaces; please"})
    assert len(fresh) == 32
    assert kept.headers["x-request-id"] == "trace-42"
    assert replaced.headers["x-request-id"] != "no spaces; please"


def test_refused_requests_and_made_up_methods_add_no_labels(tmp_path: Path) -> None:
    """Refusals are counted (an attack shows), but a client can send any method name: those
    are all one `other` series, so no client grows the registry without bound."""
    with live_server(ScriptedEngine([]), tmp_path / "home") as url, httpx.Client() as client:
        for n in range(20):
            client.request(f"X-METHOD-{n}", f"{url}/healthz")
        client.get(f"{url}/v1/threads", headers={"Host": "evil.example"})
        text = client.get(f"{url}/metrics").text
    series = [
        line for line in text.splitlines() if line.startswith("opencomposer_http_requests_total{")
    ]
    assert (
        sample(
            text, "opencomposer_http_requests_total", method="other", route="/healthz", status="405"
        )
        == 20
    )
    assert (
        sample(
            text, "opencomposer_http_requests_total", method="GET", route="unmatched", status="403"
        )
        == 1
    )
    assert not any("X-METHOD" in line for line in series)
