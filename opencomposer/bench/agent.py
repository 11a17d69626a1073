"""`opencomposer bench agent`: what the agent runtime itself costs, with the model taken out.

A real model step takes hundreds of milliseconds to seconds, so the runtime's bookkeeping
around it (building the prompt, streaming output into items, storing every event durably,
recording the model call, running tool calls through the harness) must stay small beside it:
the goal is well under 5 ms a step. Measured, each beside a floor it cannot beat:

- model step: a turn of N steps against `ReplayEngine`, which answers at once with recorded
  generations. Each step writes a short text and calls `todo_write` (a pure in-memory tool;
  a step without a call would end the turn), then a last step answers. The time inside the
  tool is measured around its `run` and taken out (an item's `duration_ms` is whole
  milliseconds, which rounds a tool this fast to zero). Floor: the same generations
  streamed by a bare `ReplayEngine.generate` loop, no runtime.
- tool call: the cost of one more call in a step, from a second turn whose steps make K calls
  each; floor: `ToolHarness.call` of the same tool with the same arguments, no runtime.
- trace store: item events (`item.started` + `item.completed` of agent messages and
  commands with realistic text) appended with `TraceStore.append`, in items/s; floor: the
  same JSON payloads inserted with raw sqlite3, one transaction per row, in a WAL database
  with synchronous=NORMAL (the least a durable write per event costs). Also the size on
  disk per 1,000 items, after a WAL checkpoint.
- prompt rebuild: `build_messages` over a realistic 200-item thread (user messages,
  reasoning, answers, tool calls with outputs of a few KB), which the runtime does before
  every step; reference: serializing the same items to JSON.
- growth: one turn long enough to reach 1,000 items; the runtime's cost per step when the
  thread holds about 100 and 1,000 items, beside the same at 10 items (it must not grow with
  the thread), and the trace store's size for the whole turn (events and model-call records)
  per 1,000 items, beside the items' own JSON.
- rollouts: 32 scripted threads run at once in one runtime (their own workspaces, harnesses
  and redactors, as RL rollouts run), in rollouts/s, beside one thread alone.

Each figure is the median of a few runs; machines are noisy, so compare ratios taken in one
run, not figures across runs.
"""

import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from opencomposer.agent.context import build_messages
from opencomposer.agent.protocol.events import Event, ItemCompletedEvent, ItemStartedEvent
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    CommandExecutionItem,
    FileReadItem,
    Item,
    ItemStatus,
    ReasoningItem,
    SearchItem,
    TextInput,
    UserMessageItem,
)
from opencomposer.agent.protocol.threads import StopReason, Thread
from opencomposer.agent.rollouts import RolloutSpec, run_rollouts
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.tools.base import ToolContext, ToolResult
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.registry import default_tools
from opencomposer.agent.tools.todo import TodoWrite, TodoWriteArgs
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.bench.rows import Row
from opencomposer.config import AgentSettings, Settings, ToolSettings
from opencomposer.serving.engines.base import (
    ChatMessage,
    EngineEvent,
    GenerationRequest,
    GenerationResult,
    ToolCall,
    Usage,
    complete,
)
from opencomposer.serving.engines.replay import ReplayEngine, stream_events

STEP_GOAL_MS = 5.0
# Large enough that no step of the benchmark triggers self-summarization.
CONTEXT_WINDOW = 1_000_000
THREAD_ID = "thr_bench"
# Thread sizes at which the growth benchmark reads the cost of a step.
GROWTH_ITEMS = (10, 100, 1000)
# Steps on each side of a mark averaged into its figure.
GROWTH_WINDOW = 2
# Tool steps of each benchmark rollout (then an answer).
ROLLOUT_STEPS = 5
TURN_ID = "turn_bench"
_WORDS = (
    "the",
    "value",
    "config",
    "returns",
    "parse",
    "request",
    "handler",
    "None",
    "self",
    "path",
    "cache",
    "token",
    "error",
    "retry",
    "list",
    "dict",
    "await",
    "async",
    "test",
    "index",
    "file",
    "line",
    "update",
    "result",
    "engine",
    "thread",
    "item",
    "step",
)


@dataclass
class TurnTiming:
    seconds: float
    tool_seconds: float
    """Time spent inside the tool's own `run`."""

    model_steps: int
    tool_calls: int
    step_seconds: list[float]
    """Each step, from its model request to the next (or to the turn's end)."""

    items: int
    item_bytes: int
    """The thread's items as JSON, the readable log's own size."""

    store_bytes: int
    """The trace store's files after the turn: events and model-call records."""


class TimedTodoWrite(TodoWrite):
    """`todo_write` that adds up the time spent in its own `run`."""

    def __init__(self) -> None:
        self.seconds = 0.0

    async def run(self, args: TodoWriteArgs, ctx: ToolContext) -> ToolResult:
        started = time.perf_counter()
        try:
            return await super().run(args, ctx)
        finally:
            self.seconds += time.perf_counter() - started


# --------------------------------------------------------------------------- helpers


def median_of(values: list[float]) -> float:
    return statistics.median(values)


async def timed(run: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await run()
    return time.perf_counter() - started


def words(rng: random.Random, chars: int) -> str:
    """Prose-and-code-like text of about `chars` characters, in lines."""
    out, length = [], 0
    while length < chars:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))
        out.append(line)
        length += len(line) + 1
    return "\n".join(out)[:chars]


# --------------------------------------------------------------------------- model steps


class StepClock(ReplayEngine):
    """`ReplayEngine` that notes when each generation is asked for: the time between two
    requests is one whole step (prompt, model output, tool calls)."""

    def __init__(self, results: list[GenerationResult]) -> None:
        super().__init__(results, context_window=CONTEXT_WINDOW)
        self.requested: list[float] = []

    def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        self.requested.append(time.perf_counter())
        return super().generate(request)


def todo_arguments(step: int, call: int) -> str:
    return json.dumps(
        {
            "todos": [
                {"content": f"Check part {call} of step {step}", "status": "in_progress"},
                {"content": "Run the tests", "status": "pending"},
                {"content": "Read the failing module", "status": "completed"},
            ]
        }
    )


def scripted_turn(steps: int, calls_per_step: int = 1) -> list[GenerationResult]:
    """`steps` generations that write a line and call todo_write, then a final answer."""
    results = [
        GenerationResult(
            text=f"Step {step}: updating the plan before the next check.",
            tool_calls=[
                ToolCall(
                    id=f"call_{step}_{n}", name="todo_write", arguments=todo_arguments(step, n)
                )
                for n in range(calls_per_step)
            ],
            finish_reason="tool_calls",
            usage=Usage(2000 + 60 * step, 40),
        )
        for step in range(1, steps + 1)
    ]
    results.append(
        GenerationResult(
            text="Done: every part is checked.", usage=Usage(2000 + 60 * (steps + 1), 10)
        )
    )
    return results


def bench_settings(root: Path, steps: int) -> Settings:
    return Settings(
        home=root / "home",
        models_dir=root / "models",
        agent=AgentSettings(max_steps=steps + 1, context_window=CONTEXT_WINDOW, max_wall_time=None),
    )


async def time_turn(root: Path, steps: int, calls_per_step: int = 1) -> TurnTiming:
    """One turn of `steps` tool steps plus an answer, in a fresh runtime under `root`."""
    workspace = root / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "README.md").write_text("A tiny workspace for the runtime benchmark.\n")
    tool = TimedTodoWrite()
    tools = [tool if t.name == tool.name else t for t in default_tools()]
    engine = StepClock(scripted_turn(steps, calls_per_step))
    runtime = AgentRuntime(bench_settings(root, steps), engine, tools=tools)
    try:
        session = await runtime.start_thread(workspace)
        started = time.perf_counter()
        turn = await session.run_turn([TextInput(text="Check every part and keep a plan.")])
        runtime.store.flush()  # the turn's time includes writing all of it
        ended = time.perf_counter()
        items = list(session.items)
    finally:
        await runtime.close()
    store = root / "home" / "traces.db"
    store_bytes = sum(p.stat().st_size for p in store.parent.glob(store.name + "*"))
    if turn.stop_reason != StopReason.answered or turn.usage.model_calls != steps + 1:
        raise RuntimeError(
            f"the benchmark turn ended early: {turn.stop_reason} "
            f"after {turn.usage.model_calls} model calls ({turn.error})"
        )
    marks = [started, *engine.requested[1:], ended]
    return TurnTiming(
        ended - started,
        tool.seconds,
        steps + 1,
        steps * calls_per_step,
        [b - a for a, b in pairwise(marks)],
        len(items),
        sum(len(item.model_dump_json().encode()) for item in items),
        store_bytes,
    )


async def time_bare_replay(results: list[GenerationResult]) -> float:
    """Seconds per generation to stream `results` with no runtime around the engine."""
    engine = ReplayEngine(results, context_window=CONTEXT_WINDOW)
    request = GenerationRequest(
        messages=[
            ChatMessage(role="system", content="bench"),
            ChatMessage(role="user", content="go"),
        ]
    )

    async def consume() -> None:
        for _ in results:
            await complete(engine, request)

    return await timed(consume) / len(results)


async def time_harness_calls(root: Path, calls: int) -> float:
    """Seconds per `ToolHarness.call` of todo_write with the arguments a step sends."""
    workspace = root / "workspace"
    workspace.mkdir(parents=True)
    harness = ToolHarness(Workspace(workspace), ToolSettings(), root / "data")
    arguments = [todo_arguments(1, n) for n in range(calls)]

    async def call_all() -> None:
        for text in arguments:
            outcome = await harness.call("todo_write", text)
            if not outcome.ok:
                raise RuntimeError(f"todo_write failed: {outcome.text}")

    try:
        return await timed(call_all) / calls
    finally:
        await harness.close()


def tenth(values: list[float], last: bool) -> float:
    """Mean of the first (or last) tenth of `values`, at least one."""
    size = max(len(values) // 10, 1)
    part = values[-size:] if last else values[:size]
    return sum(part) / len(part)


async def bench_steps(root: Path, steps: int, repeat: int) -> tuple[list[Row], dict[str, Any]]:
    """Per model step: a turn of `steps` one-call steps and an answer, whole and without the
    time inside the tool, beside bare replay streaming of the same generations."""
    await time_turn(root / "warmup", 2)  # imports, schema caches
    whole, alone, floors, first, last, tool_ms = [], [], [], [], [], []
    for run in range(repeat):
        turn = await time_turn(root / f"steps{run}", steps)
        floors.append(await time_bare_replay(scripted_turn(steps)))
        whole.append(turn.seconds / turn.model_steps)
        alone.append((turn.seconds - turn.tool_seconds) / turn.model_steps)
        first.append(tenth(turn.step_seconds, last=False))
        last.append(tenth(turn.step_seconds, last=True))
        tool_ms.append(turn.tool_seconds / turn.tool_calls * 1000)
    floor, overhead = median_of(floors), median_of(alone)
    goal = "within" if overhead * 1000 < STEP_GOAL_MS else "OVER"
    rows = [
        Row(
            "model step: whole turn",
            "bare replay",
            floor,
            median_of(whole),
            "s",
            f"{steps + 1} steps, a todo_write call in each but the last",
        ),
        Row(
            "model step: runtime alone",
            "bare replay",
            floor,
            overhead,
            "s",
            f"tools' own {median_of(tool_ms):.3f} ms/call taken out; {goal} the "
            f"{STEP_GOAL_MS:g} ms goal; first steps {median_of(first) * 1000:.2f} ms, "
            f"last {median_of(last) * 1000:.2f} ms",
        ),
    ]
    return rows, {
        "steps": steps,
        "tool_run_ms": median_of(tool_ms),
        "first_steps_ms": median_of(first) * 1000,
        "last_steps_ms": median_of(last) * 1000,
    }


async def bench_calls(root: Path, calls: int, repeat: int) -> list[Row]:
    """Per tool call: a step with `calls` calls against a step with one (the difference is
    the cost of the other calls), beside calling the harness directly."""
    ours, direct = [], []
    for run in range(repeat):
        one = await time_turn(root / f"one{run}", 1, 1)
        many = await time_turn(root / f"many{run}", 1, calls)
        ours.append((many.seconds - one.seconds) / (calls - 1))
        direct.append(await time_harness_calls(root / f"harness{run}", calls))
    return [
        Row(
            "tool call: through the runtime",
            "harness.call",
            median_of(direct),
            median_of(ours),
            "s",
            f"one step of {calls} todo_write calls vs of one",
        )
    ]


# --------------------------------------------------------------------------- trace store


def item_pair(rng: random.Random, n: int) -> tuple[Item, Item]:
    """An item as started and as completed: an agent message or a command with output."""
    if n % 2:
        started: Item = AgentMessageItem(id=f"item_{n}", turn_id=TURN_ID, step=n // 2 + 1)
        return started, started.model_copy(
            update={
                "status": ItemStatus.completed,
                "completed_at": datetime.now(UTC),
                "text": words(rng, rng.randint(200, 1200)),
            }
        )
    command = f"python -m pytest -q tests/test_{rng.choice(_WORDS)}.py"
    started = CommandExecutionItem(
        id=f"item_{n}",
        turn_id=TURN_ID,
        step=n // 2 + 1,
        call_id=f"call_{n}",
        tool="run_terminal",
        arguments={"command": command},
        arguments_text=json.dumps({"command": command}),
        command=command,
    )
    return started, started.model_copy(
        update={
            "status": ItemStatus.completed,
            "completed_at": datetime.now(UTC),
            "output": words(rng, rng.randint(500, 4000)),
            "exit_code": 0,
            "duration_ms": rng.randint(50, 5000),
        }
    )


def item_events(count: int, seed: int = 0) -> list[Event]:
    rng = random.Random(seed)
    events: list[Event] = []
    for n in range(count):
        started, completed = item_pair(rng, n)
        events.append(ItemStartedEvent(seq=len(events) + 1, thread_id=THREAD_ID, item=started))
        events.append(ItemCompletedEvent(seq=len(events) + 1, thread_id=THREAD_ID, item=completed))
    return events


def size_after_checkpoint(path: Path) -> int:
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def time_store(path: Path, events: list[Event]) -> tuple[float, int]:
    """Seconds to append `events` with the trace store from the event loop, as the runtime
    does, until all are committed; and the database size after."""
    store = SQLiteTraceStore(path)
    store.create_thread(Thread(id=THREAD_ID, workspace="/bench"), "You are a coding agent.")
    started = time.perf_counter()
    for event in events:
        store.append(event)
    store.flush()
    seconds = time.perf_counter() - started
    store.close()
    return seconds, size_after_checkpoint(path)


def time_raw_sqlite(path: Path, payloads: list[tuple[str, int, str, str]]) -> tuple[float, int]:
    """Seconds to insert the same payloads with bare sqlite3, one transaction per row."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(
            "CREATE TABLE events (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "type TEXT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (thread_id, seq)) "
            "WITHOUT ROWID"
        )
        started = time.perf_counter()
        for row in payloads:
            with db:
                db.execute("INSERT INTO events VALUES (?, ?, ?, ?)", row)
        seconds = time.perf_counter() - started
    finally:
        db.close()
    return seconds, size_after_checkpoint(path)


async def bench_store(root: Path, items: int, repeat: int) -> list[Row]:
    events = item_events(items)
    payloads: list[tuple[str, int, str, str]] = [
        (e.thread_id, e.seq, e.type, e.model_dump_json()) for e in events
    ]
    ours, raw, our_size, raw_size = [], [], 0, 0
    for run in range(repeat):
        seconds, our_size = await time_store(root / f"store{run}.db", events)
        ours.append(items / seconds)
        seconds, raw_size = time_raw_sqlite(root / f"raw{run}.db", payloads)
        raw.append(items / seconds)
    # Bytes per item are KB per 1,000 items.
    payload_kb = sum(len(p[3].encode()) for p in payloads) / items
    return [
        Row(
            "trace store: append",
            "raw sqlite3",
            median_of(raw),
            median_of(ours),
            "items/s",
            f"{items:,} items, started + completed, timed until committed; raw: a commit "
            "per event; ours: batched off the event loop; higher is better",
        ),
        Row(
            "trace store: size / 1,000 items",
            "raw sqlite3",
            raw_size / items,
            our_size / items,
            "KB",
            f"the JSON payloads alone: {payload_kb:,.0f} KB",
        ),
    ]


# --------------------------------------------------------------------------- prompt rebuild


def tool_item(
    rng: random.Random, n: int, step: int, turn_id: str
) -> CommandExecutionItem | FileReadItem | SearchItem:
    base: dict[str, Any] = {
        "id": f"item_{n}",
        "turn_id": turn_id,
        "step": step,
        "call_id": f"call_{n}",
        "status": ItemStatus.completed,
        "duration_ms": rng.randint(5, 3000),
    }
    kind = n % 3
    if kind == 0:
        command = f"python -m pytest -q tests/test_{rng.choice(_WORDS)}.py"
        return CommandExecutionItem(
            **base,
            tool="run_terminal",
            command=command,
            arguments={"command": command},
            arguments_text=json.dumps({"command": command}),
            output=words(rng, rng.randint(1000, 4000)),
            exit_code=1,
        )
    if kind == 1:
        path = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
        return FileReadItem(
            **base,
            tool="read_file",
            path=path,
            arguments={"path": path},
            arguments_text=json.dumps({"path": path}),
            total_lines=240,
            output=words(rng, rng.randint(2000, 5000)),
        )
    pattern = f"def {rng.choice(_WORDS)}_{rng.choice(_WORDS)}"
    return SearchItem(
        **base,
        tool="grep",
        query=pattern,
        arguments={"pattern": pattern},
        arguments_text=json.dumps({"pattern": pattern}),
        match_count=12,
        file_count=5,
        output=words(rng, rng.randint(500, 1500)),
    )


def realistic_thread(count: int, seed: int = 0) -> list[Item]:
    """`count` completed items in turns of a user request, steps of reasoning, sometimes
    text, and one or two tool calls, and a final answer."""
    rng = random.Random(seed)
    items: list[Item] = []

    def add(item_type: type, **fields: Any) -> None:
        items.append(item_type(id=f"item_{len(items) + 1}", status=ItemStatus.completed, **fields))

    turn = 0
    while len(items) < count:
        turn += 1
        turn_id = f"turn_{turn}"
        add(
            UserMessageItem,
            turn_id=turn_id,
            content=[TextInput(text=words(rng, 300))],
            context="branch main, 2 changed files\n M src/app.py\n?? notes.md",
        )
        last = rng.randint(3, 9)
        for step in range(1, last + 1):
            add(ReasoningItem, turn_id=turn_id, step=step, text=words(rng, rng.randint(100, 600)))
            if rng.random() < 0.4:
                add(AgentMessageItem, turn_id=turn_id, step=step, text=words(rng, 200))
            for _ in range(rng.randint(1, 2)):
                items.append(tool_item(rng, len(items) + 1, step, turn_id))
        add(AgentMessageItem, turn_id=turn_id, step=last + 1, text=words(rng, 600))
    return items[:count]


def bench_prompt(thread_items: int, repeat: int) -> list[Row]:
    items = realistic_thread(thread_items)
    system = words(random.Random(1), 6000)
    runs = max(repeat * 5, 10)
    ours, dumps = [], []
    for _ in range(runs):
        started = time.perf_counter()
        messages = build_messages(system, items)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        for item in items:
            item.model_dump_json()
        dumps.append(time.perf_counter() - started)
    chars = sum(len(m.content or "") + len(m.reasoning or "") for m in messages)
    return [
        Row(
            f"prompt rebuild: {len(items)} items",
            "items to JSON",
            median_of(dumps),
            median_of(ours),
            "s",
            f"{len(messages)} messages, {chars / 1000:,.0f}k chars; "
            "once per step that changed the log",
        )
    ]


# --------------------------------------------------------------------------- all of it


# --------------------------------------------------------------------------- scale


def step_at(turn: TurnTiming, items: int) -> float:
    """Mean seconds of the steps around the one that starts with about `items` items (a user
    message, then an agent message and a call per step)."""
    step = max((items - 1) // 2, 0)
    window = turn.step_seconds[max(step - GROWTH_WINDOW, 0) : step + GROWTH_WINDOW + 1]
    return sum(window) / len(window)


async def bench_growth(root: Path, repeat: int) -> list[Row]:
    """The cost of a step as the thread grows, and what the store keeps for it."""
    steps = GROWTH_ITEMS[-1] // 2 + GROWTH_WINDOW + 1
    at: dict[int, list[float]] = {mark: [] for mark in GROWTH_ITEMS}
    store_kb, item_kb = [], []
    for run in range(repeat):
        turn = await time_turn(root / f"growth{run}", steps)
        for mark in GROWTH_ITEMS:
            at[mark].append(step_at(turn, mark))
        store_kb.append(turn.store_bytes / turn.items)
        item_kb.append(turn.item_bytes / turn.items)
    first, *later = GROWTH_ITEMS
    rows = [
        Row(
            f"model step at {mark:,} items",
            f"at {first} items",
            median_of(at[first]),
            median_of(at[mark]),
            "s",
            "whole step (a todo_write call in it); 1.0x means no growth with the thread",
        )
        for mark in later
    ]
    rows.append(
        Row(
            "trace store: a turn / 1,000 items",
            "items' JSON",
            median_of(item_kb),
            median_of(store_kb),
            "KB",
            f"{steps + 1} model calls; events and model-call records (what each call adds)",
        )
    )
    return rows


class RolloutEngine(ReplayEngine):
    """Answers every thread by its own progress (the assistant messages in its prompt), so any
    number of threads can share it, as rollouts share a policy server."""

    def __init__(self, script: list[GenerationResult]) -> None:
        super().__init__(script, context_window=CONTEXT_WINDOW)
        self.script = script

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        done = sum(message.role == "assistant" for message in request.messages)
        for event in stream_events(self.script[done]):
            yield event


async def time_rollouts(root: Path, threads: int, steps: int) -> float:
    """Rollouts per second: `threads` turns of `steps` tool steps, all at once, in one
    runtime, each in a workspace of its own (`rollouts.run_rollouts`, as training runs them)."""
    runtime = AgentRuntime(bench_settings(root, steps), RolloutEngine(scripted_turn(steps)))
    try:
        specs = []
        for n in range(threads):
            workspace = root / f"workspace{n}"
            workspace.mkdir(parents=True)
            specs.append(RolloutSpec(workspace, "Check it."))
        started = time.perf_counter()
        results = await run_rollouts(runtime, specs)
        elapsed = time.perf_counter() - started
        for result in results:
            if result.turn is None or result.turn.stop_reason != StopReason.answered:
                raise RuntimeError(f"a benchmark rollout ended early: {result}")
        return threads / elapsed
    finally:
        await runtime.close()


async def bench_rollouts(root: Path, threads: int, steps: int, repeat: int) -> list[Row]:
    alone, together = [], []
    for run in range(repeat):
        alone.append(await time_rollouts(root / f"alone{run}", 1, steps))
        together.append(await time_rollouts(root / f"together{run}", threads, steps))
    return [
        Row(
            f"rollouts: {threads} threads at once",
            "1 thread",
            median_of(alone),
            median_of(together),
            "rollouts/s",
            f"{steps} todo_write steps and an answer each, one process; higher is better",
        )
    ]


async def run_agent_bench(
    *,
    steps: int = 50,
    calls: int = 100,
    items: int = 2000,
    thread_items: int = 200,
    rollouts: int = 32,
    repeat: int = 3,
) -> tuple[list[Row], dict[str, Any]]:
    """Every measurement above; `calls` (in one step) must be at least 2."""
    if calls < 2:
        raise ValueError(
            "calls must be at least 2: the cost per call is the difference "
            "from a step with one call"
        )
    with tempfile.TemporaryDirectory(prefix="opencomposer-bench-agent-") as scratch:
        root = Path(scratch)
        rows, info = await bench_steps(root / "steps", steps, repeat)
        rows += await bench_calls(root / "calls", calls, repeat)
        (root / "store").mkdir()
        rows += await bench_store(root / "store", items, repeat)
        rows += bench_prompt(thread_items, repeat)
        rows += await bench_growth(root / "growth", repeat)
        rows += await bench_rollouts(root / "rollouts", rollouts, ROLLOUT_STEPS, repeat)
    return rows, {
        **info,
        "calls": calls,
        "items": items,
        "thread_items": thread_items,
        "rollouts": rollouts,
        "repeat": repeat,
    }
