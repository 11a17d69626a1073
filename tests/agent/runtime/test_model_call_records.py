"""Model-call records keep only what each call adds to the thread's previous one, and give
every call back exactly as it was sent and sampled.

A turn of many steps against an engine that reports a token layer: each record read back is
the request the engine received and the token ids it reported; what is stored for a late
call is its few new messages, not the whole conversation again; a secret learnt mid-thread
starts the chain over, and a call that keeps a redacted call's text is flagged too.
"""

import sqlite3
from pathlib import Path

from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.traces.memory_store import MemoryTraceStore
from opencomposer.redact import MASK

from .conftest import text

SECRET = "tok-9f8e7d6c5b4a39281706"


def reading_steps(count: int) -> list[Reply]:
    read = call("read_file", path="calc.py")
    return [*(Reply(text=f"step {n}", calls=[read]) for n in range(count)), Reply(text="done")]


def stored_rows(runtime: AgentRuntime, thread_id: str) -> list[sqlite3.Row]:
    runtime.store.flush()
    with sqlite3.connect(runtime.settings.home / "traces.db") as db:
        db.row_factory = sqlite3.Row
        return db.execute(
            "SELECT request, kept_messages, kept_tools, kept_prompt_tokens, prompt_token_ids, "
            "redacted FROM model_calls WHERE thread_id = ? ORDER BY id",
            (thread_id,),
        ).fetchall()


async def test_every_call_reads_back_as_sent_while_only_its_news_is_stored(
    make_runtime, repo: Path
) -> None:
    engine = ScriptedEngine(reading_steps(12), tokens=True)
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    await session.run_turn(text("read calc.py a dozen times"))

    calls = runtime.store.model_calls(session.thread.id)
    assert len(calls) == len(engine.requests) == 13
    for recorded, sent in zip(calls, engine.requests, strict=True):
        assert recorded["request"] == sent.model_dump(mode="json")
        rendered = "".join(f"<{m.role}>{m.content or ''}{m.reasoning or ''}" for m in sent.messages)
        assert recorded["prompt_token_ids"] == [ord(c) for c in rendered]

    rows = stored_rows(runtime, session.thread.id)
    assert rows[0]["kept_messages"] == 0 and not rows[0]["kept_tools"]
    for row, sent in zip(rows[1:], engine.requests[1:], strict=True):
        # Everything but the last step's answer and its tool result is kept.
        assert row["kept_messages"] >= len(sent.messages) - 3
        assert row["kept_tools"]
        assert row["kept_prompt_tokens"] > 0
    whole = len(engine.requests[-1].model_dump_json())
    assert len(rows[-1]["request"]) < whole / 4
    # The late call stores a few new tokens, not the prompt again.
    assert len(rows[-1]["prompt_token_ids"]) < len(calls[-1]["prompt_token_ids"]) / 4


async def test_a_secret_learnt_mid_thread_starts_the_chain_over(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine([*reading_steps(2), *reading_steps(2)], tokens=True)
    runtime = make_runtime(engine)
    session = await runtime.start_thread(repo)
    await session.run_turn(text(f"use the key {SECRET} for this"))
    session.harness.redactor.add(SECRET)  # the thread learns it (a .env file appears)
    await session.run_turn(text("and again"))

    rows = stored_rows(runtime, session.thread.id)
    first_of_second_turn = 3
    assert rows[first_of_second_turn]["kept_messages"] == 0  # redacted whole, with the new secret
    assert rows[first_of_second_turn]["kept_prompt_tokens"] == 0
    assert all(SECRET not in row["request"] for row in rows[first_of_second_turn:])
    calls = runtime.store.model_calls(session.thread.id)
    assert MASK in calls[first_of_second_turn]["request"]["messages"][1]["content"]
    # Every call from then on holds the masked text, in its own part or in what it keeps.
    assert [call["redacted"] for call in calls] == [False] * 3 + [True] * 3


def as_sent(calls: list[dict]) -> list[tuple]:
    """What a call was, without where and when it was recorded."""
    keys = ("step", "purpose", "request", "prompt_token_ids", "completion_token_ids", "logprobs")
    return [tuple(call[key] for key in (*keys, "redacted")) for call in calls]


async def test_a_rollout_store_in_memory_reads_back_the_same_calls(
    settings, repo: Path, tmp_path: Path
) -> None:
    """The same turn on a SQLite store and on a memory store written through to a trace file:
    the same calls and items, and the file read back gives them again."""
    results = []
    for store in (None, MemoryTraceStore(path=tmp_path / "rollout.jsonl")):
        engine = ScriptedEngine(reading_steps(4), tokens=True)
        runtime = AgentRuntime(settings(), engine, store=store)
        session = await runtime.start_thread(repo)
        await session.run_turn(text("read it"))
        calls = runtime.store.model_calls(session.thread.id)
        assert len(calls) == 5
        items = [(item.type, item.status) for item in runtime.store.items(session.thread.id)]
        results.append((as_sent(calls), items, session.thread.id))
        await runtime.close()
    (sqlite_calls, sqlite_items, _), (memory_calls, memory_items, thread_id) = results
    assert memory_calls == sqlite_calls
    assert memory_items == sqlite_items
    replayed = MemoryTraceStore.replay(tmp_path / "rollout.jsonl")
    assert as_sent(replayed.model_calls(thread_id)) == memory_calls
    assert [(i.type, i.status) for i in replayed.items(thread_id)] == memory_items
