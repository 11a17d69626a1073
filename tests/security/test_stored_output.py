"""A command printing without end costs the server bounded memory and the trace store bounded
bytes: the item's streamed output is capped where it is made, as the model's is (a head
streamed live, the tail sent after a "[... N bytes omitted ...]" marker when the call ends),
so what live clients see, what the store keeps and what the model reads are each at most
`tools.output_cap` characters. The turn goes on, and the thread resumes from the store.

Real bubblewrap, real SQLite, real subprocesses printing tens of megabytes; a real uvicorn
server for the SSE variant.
"""

import json
import resource
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import pieces
from support.live_server import live_server
from support.pieces import PiecesEngine, Streamed, run_turn, stream_turn

from opencomposer.agent.protocol.events import Event, ItemDeltaEvent
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.traces.export import iter_threads
from opencomposer.config import Settings

CAP = 3_000
MiB = 2**20
# What one command may add to the store, whatever it prints: the streamed deltas (CAP
# characters and a marker, in at most a few hundred events), the item (the model's CAP), the
# model calls that carry it, and SQLite's pages around them.
STORE_BOUND = 2 * MiB

FLOODS = {
    "lines": "yes | head -c 96M",
    "one endless line": "head -c 64M /dev/zero | tr '\\0' x",
    "numbered lines": "seq 1 9000000",
    "stderr": "yes 'an error line' | head -c 64M >&2",
    "both streams": "(yes out | head -c 32M) & (yes err | head -c 32M >&2); wait",
}


def settings(tmp_path: Path, **tools: Any) -> Settings:
    return pieces.settings(tmp_path, wall_time=300, output_cap=CAP, **tools)


def store_bytes(tmp_path: Path) -> int:
    return sum(p.stat().st_size for p in (tmp_path / "home").glob("traces.db*"))


def streamed(events: list[Event], item_type: str = "command_execution") -> str:
    items = {e.item.id for e in events if e.type == "item.started" and e.item.type == item_type}
    return "".join(
        e.delta.text for e in events if isinstance(e, ItemDeltaEvent) and e.item_id in items
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


@pytest.mark.slow
@pytest.mark.parametrize("flood", list(FLOODS))
async def test_a_flood_of_output_is_stored_and_streamed_capped(
    tmp_path, workspace, runtimes, flood
):
    engine = PiecesEngine(
        [
            Streamed([], [("run_terminal", {"command": FLOODS[flood], "timeout": 240})]),
            Streamed(["read it"]),
        ]
    )
    runtime = AgentRuntime(settings(tmp_path), engine)
    runtimes.append(runtime)
    session = await runtime.start_thread(workspace)
    empty = store_bytes(tmp_path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    live = await run_turn(session, "flood")
    # Tens of megabytes went through; the server's high-water mark moved far less.
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) * 1024 < 48 * MiB
    assert store_bytes(tmp_path) - empty < STORE_BOUND
    # Live, as stored, as the model read it: the head, a marker of what was left out, the tail.
    stored = runtime.store.events(session.thread.id, 0, 100_000)
    for text in (streamed(live), streamed(stored)):
        marker = text.split("[... ", 1)[1]
        omitted = int(marker.split(" bytes omitted ...]")[0].replace(",", ""))
        assert omitted > 30 * MiB and len(text) < CAP + 100
    assert streamed(live) == streamed(stored)
    [output] = [
        e.item.output
        for e in live
        if e.type == "item.completed" and e.item.type == "command_execution"
    ]
    assert "bytes omitted" in output and len(output) < CAP + 200 and "[exit code 0]" in output
    # The turn went on: the model read the output and answered.
    assert [
        e.item.text for e in live if e.type == "item.completed" and e.item.type == "agent_message"
    ] == ["read it"]
    assert engine.requests[-1].messages[-1].content == output


@pytest.mark.slow
async def test_the_thread_resumes_after_a_flood(tmp_path, workspace, runtimes):
    """Another process opens the thread from the store and goes on with it."""
    first = AgentRuntime(
        settings(tmp_path),
        PiecesEngine(
            [Streamed([], [("run_terminal", {"command": "seq 1 5000000"})]), Streamed(["one"])]
        ),
    )
    session = await first.start_thread(workspace)
    empty = store_bytes(tmp_path)
    await run_turn(session, "flood")
    await first.close()
    assert store_bytes(tmp_path) - empty < STORE_BOUND
    engine = PiecesEngine([Streamed(["two"])])
    second = AgentRuntime(settings(tmp_path), engine)
    runtimes.append(second)
    live = await run_turn(await second.open_thread(session.thread.id), "and now?")
    assert [
        e.item.text for e in live if e.type == "item.completed" and e.item.type == "agent_message"
    ] == ["two"]
    # The model sees the capped output it saw before: head, marker, tail.
    seen = [m.content for m in engine.requests[0].messages if m.role == "tool"]
    assert len(seen) == 1 and seen[0].startswith("1\n2\n3\n") and "4999999\n5000000\n" in seen[0]
    assert "bytes omitted" in seen[0]
    [thread] = [t for t in iter_threads(second.store) if t["thread"]["id"] == session.thread.id]
    assert len(json.dumps(thread, default=str)) < STORE_BOUND


@pytest.mark.slow
async def test_a_background_flood_is_capped_in_every_read(tmp_path, workspace, runtimes):
    """A job printing without end: the call that started it streams a capped stream; each
    later read returns a capped window; the store grows by no more than that."""
    engine = PiecesEngine(
        [
            Streamed([], [("run_terminal", {"command": "yes", "background": True})]),
            Streamed([], [("terminal_output", {"job_id": "job-1", "wait": 2})]),
            Streamed([], [("terminal_kill", {"job_id": "job-1"})]),
            Streamed(["stopped"]),
        ]
    )
    runtime = AgentRuntime(settings(tmp_path), engine)
    runtimes.append(runtime)
    session = await runtime.start_thread(workspace)
    empty = store_bytes(tmp_path)
    live = await run_turn(session, "start it")
    assert len(streamed(live)) < CAP + 100
    outputs = [
        e.item.output
        for e in live
        if e.type == "item.completed" and e.item.type in ("command_execution", "tool_call")
    ]
    assert len(outputs) == 3 and all(len(text) < CAP + 400 for text in outputs)
    assert "bytes omitted" in outputs[1]
    assert store_bytes(tmp_path) - empty < STORE_BOUND


@pytest.mark.slow
async def test_the_sse_stream_of_a_flood_is_capped(tmp_path, workspace):
    """Over HTTP with the default cap (30,000 characters): the SSE body of a turn that printed
    64 MiB stays a few hundred kilobytes, and ends with the tail and the model's answer."""
    engine = PiecesEngine(
        [
            Streamed([], [("run_terminal", {"command": "seq 1 8000000; echo last-line"})]),
            Streamed(["done"]),
        ]
    )
    with live_server(engine, tmp_path / "home") as url:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            _, sse = await stream_turn(http, workspace, "go")
    assert len(sse) < 512 * 1024
    assert "bytes omitted" in sse and "last-line" in sse and '"done"' in sse
