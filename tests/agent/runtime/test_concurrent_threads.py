"""Many threads at once in one runtime, as RL rollouts run: 32 workspaces, each with its own
`.env` secret, all turns streamed concurrently through `AgentAPI.stream_turn`. Nothing may leak
between them: not items, not events, not secrets (one workspace's secret masks only its own
thread's text), not the redaction flag."""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    FileReadItem,
    TextInput,
    UserMessageItem,
)
from opencomposer.agent.protocol.methods import TurnStartParams
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings
from opencomposer.redact import MASK
from opencomposer.serving.engines.base import (
    EngineEvent,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ToolCall,
    Usage,
)
from opencomposer.serving.engines.replay import stream_events

THREADS = 32


def secret(n: int) -> str:
    return f"plum{n:02d}orchard{n:02d}quiet"  # no pattern's shape: masked only as a .env value


class ReadThenQuote:
    """Serves every thread: the first step reads notes.txt, the next answers with what the
    tool returned and the request it was asked, so a reply routed to the wrong thread shows."""

    name = "scripted"

    async def models(self) -> list[ModelInfo]:
        return [ModelInfo(id="scripted-model", context_window=32_768)]

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        asked = next(m.content for m in reversed(request.messages) if m.role == "user")
        last = request.messages[-1]
        if last.role == "tool":
            result = GenerationResult(text=f"{asked.splitlines()[0]} | {last.content}")
        else:
            call = ToolCall(id="call_1", name="read_file", arguments=json.dumps({"path": "n.txt"}))
            result = GenerationResult(tool_calls=[call], finish_reason="tool_calls")
        result.usage = Usage(10, 5)
        for event in stream_events(result):
            await asyncio.sleep(0)  # the threads' streams interleave
            yield event

    async def aclose(self) -> None:
        return None


async def test_thirty_two_threads_share_nothing(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", models_dir=tmp_path / "models")
    runtime = AgentRuntime(settings, ReadThenQuote())
    api = AgentAPI(runtime, lambda: [tmp_path])
    try:
        sessions = []
        for n in range(THREADS):
            root = tmp_path / f"ws{n}"
            root.mkdir()
            (root / ".env").write_text(f"API_KEY={secret(n)}\n")
            other = secret((n + 1) % THREADS)
            (root / "n.txt").write_text(f"notes of {n}; mine {secret(n)}; neighbour's {other}\n")
            sessions.append(await runtime.start_thread(root))

        async def one(n: int) -> list:
            params = TurnStartParams(
                thread_id=sessions[n].thread.id, input=[TextInput(text=f"request {n}")]
            )
            async with await api.stream_turn(params) as stream:
                return [event async for event in stream]

        streams = await asyncio.gather(*(one(n) for n in range(THREADS)))
        for n, (session, events) in enumerate(zip(sessions, streams, strict=True)):
            check_thread(runtime, n, session.thread.id, events)
    finally:
        await runtime.close()


def check_thread(runtime: AgentRuntime, n: int, thread_id: str, events: list) -> None:
    assert {e.thread_id for e in events} == {thread_id}
    seqs = [e.seq for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # its own log, no gap
    assert events[-1].type == "turn.completed"
    ended = events[-1].turn
    assert (ended.status, ended.stop_reason) == (TurnStatus.completed, StopReason.answered)
    assert runtime.store.events(thread_id, seqs[0] - 1, 10_000) == events

    stored = runtime.store.items(thread_id)
    [user] = [i for i in stored if isinstance(i, UserMessageItem)]
    assert user.content[0].text == f"request {n}"
    [read] = [i for i in stored if isinstance(i, FileReadItem)]
    [answer] = [i for i in stored if isinstance(i, AgentMessageItem)]
    neighbour = secret((n + 1) % THREADS)
    # Its own secret is masked; the neighbour's is no secret of this workspace.
    assert read.output is not None and f"notes of {n};" in read.output
    assert secret(n) not in read.output and MASK in read.output and neighbour in read.output
    assert answer.text.startswith(f"request {n} |") and neighbour in answer.text
    assert secret(n) not in json.dumps([e.model_dump(mode="json") for e in events])
    # Nothing of another workspace was masked, so no call is flagged as redacted.
    calls = runtime.store.model_calls(thread_id)
    assert len(calls) == 2 and not any(call["redacted"] for call in calls)
