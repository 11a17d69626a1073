"""`opencomposer bench http`: what serving over HTTP costs, with the model taken out.

The server runs under uvicorn on a loopback port in a child process of its own
(`http_server`), with an engine that answers at once (`InstantEngine`: a replay engine that
streams the same short answer for every request), so what is measured is the HTTP layer,
routing, validation, JSON and SSE, and the client. The clients stay in this process, on one
asyncio loop, each with its own httpx client and connection: the server has its own
interpreter and GIL, so at 16 and 100 clients the two no longer take turns on one, though they
still share the machine's cores. At each concurrency (1, 16 and 100 clients by default), each
beside the same engine called in this process, without HTTP:

- chat completions: non-streaming `POST /v1/chat/completions`, requests per second and the
  p50 and p99 latency of a request; baseline: `complete(engine, request)` with the same
  number of concurrent callers.
- agent turns: time to the first event of a turn, from `POST /v1/threads/{id}/turns` to its
  first SSE frame (`turn.started`); each client has its own thread and reads every turn to
  `turn.completed` before starting the next. Baseline: the runtime in-process,
  `session.start_turn` to the first event of a subscription to the thread's log.

The HTTP figures include the clients' own work in this process, so the ratio is what HTTP
costs a caller, not the server's time alone; compare ratios taken in one run, not figures
across runs or machines.

Last, one row with a model in it: what constrained decoding, which the OpenAI surface offers
for forced tool calls and JSON replies, costs a token on the embedded engine
(`bench.constrained`: tiny-moe on the CPU, baseline the same generation unconstrained).
"""

import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from opencomposer.bench.constrained import constrained_decoding_row
from opencomposer.bench.rows import Row, percentile
from opencomposer.config import Settings
from opencomposer.serving.engines.base import (
    ChatMessage,
    GenerationRequest,
    complete,
)
from opencomposer.serving.engines.replay import InstantEngine

ANSWER = "Done: the tests pass."
PROMPT = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Do the tests pass?"},
]


@contextmanager
def serving(root: Path, *, timeout: float = 30) -> Iterator[str]:
    """The app under uvicorn on a loopback port in a child process (`http_server`), its home
    and its workspaces under `root`; yields its URL. The child ends with the block, however
    the block ends: SIGTERM, then SIGKILL if it has not stopped in 10 s."""
    port_file = root / "server.port"
    child = subprocess.Popen(
        [sys.executable, "-m", "opencomposer.bench.http_server", str(root), str(port_file)],
        # stdout carries the bench's report (--json), so the server's
        # output goes to stderr; stdin's pipe closing tells it we are gone.
        stdin=subprocess.PIPE,
        stdout=2,
    )
    try:
        deadline = time.monotonic() + timeout
        while not port_file.exists():
            if child.poll() is not None:
                raise RuntimeError(f"the bench server exited with status {child.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bench server did not start in {timeout:.0f} s")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{int(port_file.read_text())}"
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdin:
            child.stdin.close()


@asynccontextmanager
async def http_clients(url: str, count: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """One httpx client, with its own connection pool, per simulated client. One pool shared
    by 100 clients measured httpx rather than the server: httpcore scans every pooled
    connection for every waiting request, ~11 ms of client CPU a request at 100 clients
    (61 req/s, where separate clients reach ~700 on the same two cores)."""
    async with AsyncExitStack() as stack:
        # Plain HTTP on loopback: no TLS, so skip loading a CA bundle (19 ms a client).
        yield [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=url, timeout=60, verify=False)
            )
            for _ in range(count)
        ]


async def clients(
    concurrency: int, total: int, one: Callable[[int], Awaitable[float]]
) -> tuple[float, list[float]]:
    """`total` calls of `one(client)` by `concurrency` clients, each calling in turn;
    the wall time and each call's figure."""
    figures: list[float] = []
    counter = iter(range(total))

    async def client(number: int) -> None:
        for _ in counter:
            figures.append(await one(number))

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(concurrency)))
    return time.perf_counter() - started, figures


# --------------------------------------------------------------------------- chat completions


async def chat_over_http(url: str, concurrency: int, total: int) -> tuple[float, list[float]]:
    async with http_clients(url, concurrency) as http:

        async def one(client: int) -> float:
            started = time.perf_counter()
            response = await http[client].post(
                "/v1/chat/completions", json={"model": InstantEngine.MODEL, "messages": PROMPT}
            )
            response.raise_for_status()
            if response.json()["choices"][0]["message"]["content"] != ANSWER:
                raise RuntimeError(f"unexpected answer: {response.text}")
            return time.perf_counter() - started

        await clients(concurrency, concurrency, one)  # connections open, imports done
        return await clients(concurrency, total, one)


async def chat_in_process(
    engine: InstantEngine, concurrency: int, total: int
) -> tuple[float, list[float]]:
    request = GenerationRequest(messages=[ChatMessage.model_validate(m) for m in PROMPT])

    async def one(_client: int) -> float:
        started = time.perf_counter()
        result = await complete(engine, request)
        if result.text != ANSWER:
            raise RuntimeError(f"unexpected answer: {result.text!r}")
        return time.perf_counter() - started

    await clients(concurrency, concurrency, one)
    return await clients(concurrency, total, one)


def chat_rows(
    concurrency: int, total: int, http: tuple[float, list[float]], local: tuple[float, list[float]]
) -> list[Row]:
    (http_wall, http_lat), (local_wall, local_lat) = http, local
    name = f"chat completion, {concurrency} client{'s' if concurrency > 1 else ''}"
    note = f"{total} non-streaming requests"
    return [
        Row(
            f"{name}: throughput",
            "in-process",
            total / local_wall,
            total / http_wall,
            "req/s",
            f"{note}; higher is better",
        ),
        Row(
            f"{name}: p50 latency",
            "in-process",
            percentile(local_lat, 0.5),
            percentile(http_lat, 0.5),
            "s",
            note,
        ),
        Row(
            f"{name}: p99 latency",
            "in-process",
            percentile(local_lat, 0.99),
            percentile(http_lat, 0.99),
            "s",
            note,
        ),
    ]


# --------------------------------------------------------------------------- agent turns


def turn_body(client: int) -> dict[str, Any]:
    return {"input": [{"type": "text", "text": f"Client {client}: do the tests pass?"}]}


async def turns_over_http(url: str, workspace: Path, concurrency: int, total: int) -> list[float]:
    async with http_clients(url, concurrency) as http:

        async def new_thread(client: int) -> str:
            response = await http[client].post("/v1/threads", json={"workspace": str(workspace)})
            response.raise_for_status()
            return response.json()["thread"]["id"]

        threads = await asyncio.gather(*(new_thread(n) for n in range(concurrency)))

        async def one(client: int) -> float:
            started = time.perf_counter()
            first: float | None = None
            async with http[client].stream(
                "POST", f"/v1/threads/{threads[client]}/turns", json=turn_body(client)
            ) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if first is None and line.startswith("event: "):
                        first = time.perf_counter() - started
                    if line == "event: turn.completed":
                        break
            if first is None:
                raise RuntimeError("a turn's stream sent no event")
            return first

        await clients(concurrency, concurrency, one)
        return (await clients(concurrency, total, one))[1]


async def turns_in_process(
    root: Path, workspace: Path, concurrency: int, total: int
) -> list[float]:
    from opencomposer.agent.protocol.events import TurnCompletedEvent
    from opencomposer.agent.protocol.items import TextInput
    from opencomposer.agent.runtime import AgentRuntime

    settings = Settings(home=root / "home", models_dir=root / "models")
    runtime = AgentRuntime(settings, InstantEngine(ANSWER))
    try:
        sessions = [await runtime.start_thread(workspace) for _ in range(concurrency)]

        async def one(client: int) -> float:
            session = sessions[client]
            started = time.perf_counter()
            after = session.log.seq
            turn = await session.start_turn([TextInput(text=turn_body(client)["input"][0]["text"])])
            subscription = session.subscribe(after, answers_approvals=True)
            try:
                await anext(subscription)
                first = time.perf_counter() - started
                async for event in subscription:
                    if isinstance(event, TurnCompletedEvent) and event.turn.id == turn.id:
                        break
            finally:
                subscription.close()
            return first

        await clients(concurrency, concurrency, one)
        return (await clients(concurrency, total, one))[1]
    finally:
        await runtime.close()


def turn_rows(concurrency: int, total: int, http: list[float], local: list[float]) -> list[Row]:
    name = f"agent turn, {concurrency} client{'s' if concurrency > 1 else ''}"
    note = f"{total} one-step turns, each client in its own thread"
    return [
        Row(
            f"{name}: first event p50",
            "in-process",
            percentile(local, 0.5),
            percentile(http, 0.5),
            "s",
            note,
        ),
        Row(
            f"{name}: first event p99",
            "in-process",
            percentile(local, 0.99),
            percentile(http, 0.99),
            "s",
            note,
        ),
    ]


# --------------------------------------------------------------------------- all of it


async def run_http_bench(
    *,
    concurrency: list[int] | None = None,
    requests: int = 1000,
    turns: int = 200,
    constrained_tokens: int = 64,
) -> tuple[list[Row], dict[str, Any]]:
    """Every measurement above at each concurrency; at least one request (turn) per client;
    then what constrained decoding (the JSON and forced tool calls the OpenAI surface offers)
    costs a token on the embedded engine (`bench.constrained`)."""
    levels = concurrency or [1, 16, 100]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="opencomposer-bench-http-") as scratch:
        root = Path(scratch)
        workspace = root / "workspace"
        workspace.mkdir()
        (workspace / "README.md").write_text("A tiny workspace for the HTTP benchmark.\n")
        with serving(root) as url:
            for level in levels:
                total = max(requests, level)
                http = await chat_over_http(url, level, total)
                local = await chat_in_process(InstantEngine(ANSWER), level, total)
                rows += chat_rows(level, total, http, local)
            for level in levels:
                total = max(turns, level)
                http_turns = await turns_over_http(url, workspace, level, total)
                local_turns = await turns_in_process(
                    root / f"local{level}", workspace, level, total
                )
                rows += turn_rows(level, total, http_turns, local_turns)
        rows.append(await constrained_decoding_row(root, max_tokens=constrained_tokens))
    return rows, {
        "concurrency": levels,
        "requests": requests,
        "turns": turns,
        "constrained_tokens": constrained_tokens,
    }
