"""Many turns at once over SSE against the real server: 100 threads, one turn each, all started
together. Each turn calls a tool (glob in a tiny workspace) and then answers. Every client must
get its own turn's events exactly once and in order (seq contiguous from `turn.started` to
`turn.completed`), and what it got must be the thread's stored log. One of the streams is read
with an SSE client library (httpx-sse) instead of the tests' own parser, to check the framing.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.live_server import live_server

from opencomposer.serving.engines.base import (
    EngineEvent,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ToolCall,
    Usage,
)
from opencomposer.serving.engines.replay import stream_events

THREADS = 100


class ToolThenAnswer:
    """A scripted engine that serves many threads at once: a step whose prompt ends with the
    user's request calls glob, a step after a tool result answers and quotes the request (so
    a turn that got another thread's reply is caught). It yields to the event loop between
    events, so the turns' streams interleave."""

    name = "scripted"

    def __init__(self) -> None:
        self.requests = 0

    async def models(self) -> list[ModelInfo]:
        return [ModelInfo(id="scripted-model", context_window=32_768)]

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        self.requests += 1
        asked = next(m.content for m in reversed(request.messages) if m.role == "user")
        if request.messages[-1].role == "tool":
            result = GenerationResult(text=f"answer to: {asked}", usage=Usage(10, 5))
        else:
            call = ToolCall(
                id=f"call_{self.requests}", name="glob", arguments=json.dumps({"pattern": "*.py"})
            )
            result = GenerationResult(
                tool_calls=[call], finish_reason="tool_calls", usage=Usage(10, 5)
            )
        for event in stream_events(result):
            await asyncio.sleep(0)
            yield event

    async def aclose(self) -> None:
        return None


def parse(body_lines: list[str]) -> list[dict[str, Any]]:
    """The events of an SSE body read line by line: id, event name and data of each."""
    events, frame = [], {}
    for line in body_lines:
        if line.startswith("id: "):
            frame["id"] = int(line[4:])
        elif line.startswith("event: "):
            frame["event"] = line[7:]
        elif line.startswith("data: "):
            frame["data"] = json.loads(line[6:])
        elif line == "" and frame:
            events.append(frame)
            frame = {}
    return events


async def start_thread(http: httpx.AsyncClient, workspace: Path) -> str:
    response = await http.post("/v1/threads", json={"workspace": str(workspace)})
    assert response.status_code == 200, response.text
    return response.json()["thread"]["id"]


async def turn_with_own_parser(
    http: httpx.AsyncClient, thread_id: str, request: str
) -> list[dict[str, Any]]:
    async with http.stream(
        "POST",
        f"/v1/threads/{thread_id}/turns",
        json={"input": [{"type": "text", "text": request}]},
    ) as response:
        assert response.status_code == 200, await response.aread()
        return parse([line async for line in response.aiter_lines()])


async def turn_with_httpx_sse(
    http: httpx.AsyncClient, thread_id: str, request: str
) -> list[dict[str, Any]]:
    from httpx_sse import aconnect_sse

    async with aconnect_sse(
        http,
        "POST",
        f"/v1/threads/{thread_id}/turns",
        json={"input": [{"type": "text", "text": request}]},
    ) as source:
        source.response.raise_for_status()
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return [
            {"id": int(sse.id), "event": sse.event, "data": sse.json()}
            async for sse in source.aiter_sse()
        ]


async def test_a_hundred_concurrent_turns_each_get_their_own_events_once(tmp_path: Path) -> None:
    pytest.importorskip("httpx_sse")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("print('hi')\n")
    (workspace / "util.py").write_text("X = 1\n")
    engine = ToolThenAnswer()
    # No connection is reused: on a loaded machine the server may close an idle keep-alive
    # connection (after its 5 s) just as the client sends the next request on it.
    limits = httpx.Limits(max_connections=THREADS * 2, max_keepalive_connections=0)
    with live_server(engine, tmp_path / "home", timeout=60) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
            threads = await asyncio.gather(*(start_thread(http, workspace) for _ in range(THREADS)))
            requests = [f"request number {n}" for n in range(THREADS)]
            runs = [turn_with_httpx_sse(http, threads[0], requests[0])]
            runs += [
                turn_with_own_parser(http, thread_id, request)
                for thread_id, request in zip(threads[1:], requests[1:], strict=True)
            ]
            received = await asyncio.gather(*runs)

            assert engine.requests == 2 * THREADS
            for thread_id, request, events in zip(threads, requests, received, strict=True):
                ids = [e["id"] for e in events]
                # Seq 1 is thread.started; the turn's events follow without a gap or repeat.
                assert ids == list(range(2, 2 + len(events))), (thread_id, ids)
                assert ids == [e["data"]["seq"] for e in events]
                assert all(e["event"] == e["data"]["type"] for e in events)
                assert all(e["data"]["thread_id"] == thread_id for e in events)
                assert events[0]["event"] == "turn.started"
                assert events[-1]["event"] == "turn.completed"
                assert events[-1]["data"]["turn"]["status"] == "completed"
                completed = [e["data"]["item"] for e in events if e["event"] == "item.completed"]
                search = next(item for item in completed if item["type"] == "search")
                assert search["match_count"] == 2
                assert completed[-1]["type"] == "agent_message"
                assert completed[-1]["text"] == f"answer to: {request}"

                stored = await http.get(f"/v1/threads/{thread_id}/events", params={"after_seq": 1})
                assert stored.json()["events"] == [e["data"] for e in events]
