"""`opencomposer bench lsp`: what the language server adds to a completion and to an event.

Two servers run over stdio, each in a process of its own (`lsp_server`): ours, with an instant
engine and no debounce, and a bare pygls server that answers at once. One pygls client drives
both the same way, one request at a time, so the difference is our server's own work:

- inline completion: `textDocument/inlineCompletion` from request to response. Ours builds
  the FIM prompt, runs the engine, trims and records the proposal in the trace store; the bare
  handler returns a fixed item.
- event delivery: from sending `opencomposer/turn/start` to receiving the turn's first
  `opencomposer/event`; the bare server sends one notification from a request. Ours starts
  a turn (git facts, the user message stored) and forwards its log; each turn is read to its
  end before the next starts.
"""

import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from opencomposer.bench.lsp_server import EVENT_METHOD, NOTIFY_METHOD
from opencomposer.bench.rows import Row, percentile

SOURCE = "def add(a, b):\n    \n\nprint(add(1, 2))\n"
CURSOR = lsp.Position(line=1, character=4)


@asynccontextmanager
async def connected(kind: str, home: Path, workspace: Path) -> AsyncIterator[LanguageClient]:
    """A client initialized with the server of `kind`, the bench file open in it."""
    client = LanguageClient("opencomposer-bench", "1")
    await client.start_io(sys.executable, "-m", "opencomposer.bench.lsp_server", kind, str(home))
    try:
        await client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(),
                root_uri=workspace.as_uri(),
                workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="bench")],
            )
        )
        client.initialized(lsp.InitializedParams())
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=(workspace / "add.py").as_uri(),
                    language_id="python",
                    version=1,
                    text=SOURCE,
                )
            )
        )
        yield client
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()


async def timed(count: int, one: Callable[[], Awaitable[Any]]) -> list[float]:
    """Seconds each of `count` sequential calls takes, after a few unmeasured ones."""
    for _ in range(min(5, count)):
        await one()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        await one()
        times.append(time.perf_counter() - start)
    return times


async def completions(client: LanguageClient, workspace: Path, count: int) -> list[float]:
    params = lsp.InlineCompletionParams(
        text_document=lsp.TextDocumentIdentifier(uri=(workspace / "add.py").as_uri()),
        position=CURSOR,
        context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Invoked),
    )

    async def one() -> None:
        result = await client.text_document_inline_completion_async(params)
        if not result:
            raise RuntimeError("the server proposed no completion")

    return await timed(count, one)


async def first_events(
    client: LanguageClient, kind: str, workspace: Path, count: int
) -> list[float]:
    """Seconds from a turn's request to its first event (ours) or from a request to the
    notification it sends (bare)."""
    arrived: asyncio.Queue[str] = asyncio.Queue()  # event types
    method = "opencomposer/event" if kind == "ours" else EVENT_METHOD
    client.feature(method)(lambda params: arrived.put_nowait(_type(params)))
    if kind == "bare":

        async def one() -> None:
            await client.protocol.send_request_async(NOTIFY_METHOD, {})
            await arrived.get()

        return await timed(count, one)

    started = await client.protocol.send_request_async(
        "opencomposer/thread/start", {"workspace": str(workspace)}
    )
    thread_id = started.thread.id
    while (await arrived.get()) != "thread.started":
        pass

    async def turn() -> None:
        request = {"thread_id": thread_id, "input": [{"type": "text", "text": "Do they pass?"}]}
        await client.protocol.send_request_async("opencomposer/turn/start", request)
        await arrived.get()

    async def rest() -> None:
        while (await arrived.get()) != "turn.completed":
            pass

    times = []
    for index in range(count + 5):
        start = time.perf_counter()
        await turn()
        if index >= 5:
            times.append(time.perf_counter() - start)
        await rest()
    return times


def _type(params: Any) -> str:
    return params["type"] if isinstance(params, dict) else params.type


def rows(name: str, bare: list[float], ours: list[float], note: str) -> list[Row]:
    return [
        Row(
            f"{name}: p{int(q * 100)}",
            "bare pygls handler",
            percentile(bare, q),
            percentile(ours, q),
            "s",
            note,
        )
        for q in (0.5, 0.99)
    ]


async def run_lsp_bench(
    *, completions_count: int = 300, turns: int = 100
) -> tuple[list[Row], dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="opencomposer-bench-lsp-") as scratch:
        root = Path(scratch)
        workspace = root / "workspace"
        workspace.mkdir()
        (workspace / "add.py").write_text(SOURCE)
        figures: dict[str, dict[str, list[float]]] = {}
        for kind in ("bare", "ours"):
            async with connected(kind, root / kind, workspace) as client:
                figures[kind] = {
                    "completion": await completions(client, workspace, completions_count),
                    "event": await first_events(client, kind, workspace, turns),
                }
    table = [
        *rows(
            "inline completion, request to response",
            figures["bare"]["completion"],
            figures["ours"]["completion"],
            f"{completions_count} sequential requests",
        ),
        *rows(
            "event delivery, request to first event",
            figures["bare"]["event"],
            figures["ours"]["event"],
            f"{turns} one-step turns",
        ),
    ]
    return table, {"completions": completions_count, "turns": turns}
