"""What secret-leak tests share: an engine double that streams the model's reply in exactly
the pieces a test chooses, the runtime's settings and a fixture that closes runtimes, one turn
as subscribers (in process, or over SSE from a live server) receive it, and everything a trace
store keeps on disk."""

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from opencomposer.agent.protocol.events import Event, TurnCompletedEvent
from opencomposer.agent.protocol.items import TextInput
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import ThreadSession
from opencomposer.config import Settings
from opencomposer.serving.engines.base import (
    EngineEvent,
    Finished,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    Usage,
)


@dataclass
class Streamed:
    """One model reply: its text in exactly these deltas, then these tool calls."""

    pieces: list[str] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)


class PiecesEngine:
    """Answers each request with the next reply, streaming its text piece by piece."""

    name = "pieces"

    def __init__(self, replies: Iterable[Streamed]) -> None:
        self.replies = list(replies)
        self.requests: list[GenerationRequest] = []

    async def models(self) -> list[ModelInfo]:
        return [ModelInfo(id="pieces-model", context_window=32_768)]

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else Streamed(["Done."])
        step = len(self.requests)
        calls = [
            ToolCall(id=f"call_{step}_{n}", name=name, arguments=json.dumps(args))
            for n, (name, args) in enumerate(reply.calls)
        ]
        for piece in reply.reasoning:
            yield ReasoningDelta(piece)
        for piece in reply.pieces:
            yield TextDelta(piece)
        for n, tool_call in enumerate(calls):
            yield ToolCallStarted(n, tool_call.id, tool_call.name)
            yield ToolCallArgumentsDelta(n, tool_call.arguments)
        yield Finished(
            GenerationResult(
                text="".join(reply.pieces),
                reasoning="".join(reply.reasoning),
                tool_calls=calls,
                usage=Usage(10, 10),
                finish_reason="tool_calls" if calls else "stop",
                model="pieces-model",
            )
        )

    async def aclose(self) -> None:
        return None


def stored_text(database: Path) -> str:
    """Everything the SQLite file and its WAL hold: the raw bytes (deleted rows included)
    and every row as SQL (a value spilling over pages is whole there)."""
    raw = b"".join(p.read_bytes() for p in database.parent.glob(database.name + "*") if p.is_file())
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        dump = "\n".join(db.iterdump())
    return raw.decode("utf-8", errors="replace") + "\n" + dump


async def run_turn(session: ThreadSession, request: str) -> list[Event]:
    """One turn, returning every event as subscribers received it live."""
    subscription = session.subscribe(session.log.seq)
    turn = await session.start_turn([TextInput(text=request)])
    received: list[Event] = []
    async with asyncio.timeout(120):
        async for event in subscription:
            received.append(event)
            if isinstance(event, TurnCompletedEvent) and event.turn.id == turn.id:
                break
    subscription.close()
    return received


def dumped(events: Iterable[Event]) -> str:
    return "\n".join(event.model_dump_json() for event in events)


def settings(tmp_path: Path, wall_time: float = 120, **tools: Any) -> Settings:
    """A runtime's settings with its data under `tmp_path`; `tools` are [tools] keys."""
    return Settings(
        home=tmp_path / "home",
        models_dir=tmp_path / "models",
        agent={"max_wall_time": wall_time},
        tools=tools,
    )


@pytest.fixture
async def runtimes() -> AsyncIterator[list[AgentRuntime]]:
    """Runtimes a test makes, closed when it ends."""
    made: list[AgentRuntime] = []
    yield made
    for runtime in made:
        await runtime.close()


async def stream_turn(http: httpx.AsyncClient, workspace: Path, text: str) -> tuple[str, str]:
    """A thread started on `workspace` and one turn's SSE stream, as a client reads it whole;
    returns the thread id and the stream's text."""
    started = await http.post("/v1/threads", json={"workspace": str(workspace)})
    thread_id = started.json()["thread"]["id"]
    async with http.stream(
        "POST",
        f"/v1/threads/{thread_id}/turns",
        json={"input": [{"type": "text", "text": text}]},
    ) as response:
        return thread_id, (await response.aread()).decode()
