"""Self-summarization: triggered twice in one turn, the context rebuilt each time, the log and
the model calls holding the chain; and the deterministic fallback."""

from pathlib import Path

from support.scripted_engine import Reply, ScriptedEngine, call

from opencomposer.agent.protocol.items import ContextSummaryItem, ItemStatus, ReasoningItem
from opencomposer.agent.protocol.threads import StopReason
from opencomposer.agent.summarizer import summary_trigger
from opencomposer.serving.engines.errors import EngineServerError

from .conftest import text

READ_BIG = call("read_file", path="big.txt")
# An absolute trigger: 2,000 tokens of context (the window is 8,192).
SETTINGS = {"summary_trigger": 2000, "summary_max_tokens": 1024}


def _big_file(repo: Path) -> None:
    (repo / "big.txt").write_text("".join(f"line {n:04d} of a long file\n" for n in range(120)))


async def test_summarized_twice_in_one_turn(make_runtime, repo: Path) -> None:
    _big_file(repo)
    engine = ScriptedEngine(
        [
            Reply(calls=[READ_BIG], usage=(1500, 50)),
            Reply(
                reasoning="What matters so far?", text="SUMMARY ONE: read big.txt", usage=(2700, 40)
            ),
            Reply(calls=[READ_BIG], usage=(300, 30)),
            Reply(calls=[READ_BIG], usage=(1700, 30)),
            Reply(text="SUMMARY TWO: read big.txt three times", usage=(2800, 40)),
            Reply(text="All done."),
        ],
        context_window=8192,
    )
    runtime = make_runtime(engine, **SETTINGS)
    session = await runtime.start_thread(repo)
    turn = await session.run_turn(text("study big.txt"))
    assert turn.stop_reason == StopReason.answered

    summaries = [i for i in session.items if isinstance(i, ContextSummaryItem)]
    assert [(s.summary_index, s.method, s.status) for s in summaries] == [
        (1, "model", ItemStatus.completed),
        (2, "model", ItemStatus.completed),
    ]
    assert summaries[0].text == "SUMMARY ONE: read big.txt"
    assert all(s.tokens_before > 2000 for s in summaries)
    assert all(s.tokens_after < s.tokens_before for s in summaries)
    assert "Files you read: big.txt" in summaries[0].state
    assert "Summaries so far: 2" in summaries[1].state
    # The summary's thinking is logged (it is trained on) beside the summary.
    thinking = next(i for i in session.items if isinstance(i, ReasoningItem))
    assert thinking.step == summaries[0].step and thinking.text == "What matters so far?"

    first, summarize, after = engine.requests[0], engine.requests[1], engine.requests[2]
    # Summarizing continues the same context (the engine's cached prefix is reused) ...
    assert summarize.messages[:2] == first.messages
    assert summarize.messages[-1].role == "user"
    assert summarize.messages[-1].content.startswith("Please summarize the conversation")
    assert summarize.tool_choice == "none" and summarize.tools == first.tools
    # ... and the next step restarts from system prompt, task, summary and state.
    assert [m.role for m in after.messages] == ["system", "user", "user"]
    assert after.messages[0] == first.messages[0]
    assert after.messages[1].content == "study big.txt"
    assert "<summary>\nSUMMARY ONE: read big.txt\n</summary>" in after.messages[2].content
    assert "Summaries so far: 1" in after.messages[2].content
    last = engine.requests[-1].messages
    assert [m.role for m in last] == ["system", "user", "user"]
    assert "SUMMARY TWO" in last[2].content and "SUMMARY ONE" not in last[2].content

    calls = runtime.store.model_calls(session.thread.id)
    assert [(c["purpose"], c["segment"]) for c in calls] == [
        ("agent", 0),
        ("summary", 0),
        ("agent", 1),
        ("agent", 1),
        ("summary", 1),
        ("agent", 2),
    ]


async def test_empty_summary_falls_back_to_a_digest(make_runtime, repo: Path) -> None:
    _big_file(repo)
    engine = ScriptedEngine(
        [
            Reply(text="Reading it.", calls=[READ_BIG], usage=(1900, 50)),
            Reply(text="   ", usage=(2800, 1)),
            Reply(text="Done."),
        ],
        context_window=8192,
    )
    session = await make_runtime(engine, **SETTINGS).start_thread(repo)
    await session.run_turn(text("study big.txt"))
    summary = next(i for i in session.items if isinstance(i, ContextSummaryItem))
    assert summary.method == "truncation"
    assert summary.text.startswith("Summarizing failed (the summary was empty)")
    assert "- you said: Reading it.\n- read big.txt" in summary.text
    rebuilt = engine.requests[2].messages
    assert [m.role for m in rebuilt] == ["system", "user", "user"]
    assert "older steps were dropped" in rebuilt[2].content and "<state>" in rebuilt[2].content


async def test_failed_summary_call_falls_back_too(make_runtime, repo: Path) -> None:
    _big_file(repo)
    engine = ScriptedEngine(
        [
            Reply(calls=[READ_BIG], usage=(1900, 50)),
            Reply(error=EngineServerError("summarizer down")),
            Reply(text="Done."),
        ],
        context_window=8192,
    )
    session = await make_runtime(engine, **SETTINGS).start_thread(repo)
    turn = await session.run_turn(text("study big.txt"))
    assert turn.stop_reason == StopReason.answered
    summary = next(i for i in session.items if isinstance(i, ContextSummaryItem))
    assert summary.method == "truncation" and "summarizer down" in summary.text


async def test_overflow_reported_by_the_engine_triggers_a_summary(make_runtime, repo) -> None:
    from opencomposer.serving.engines.errors import ContextLengthExceeded

    engine = ScriptedEngine(
        [
            Reply(calls=[call("glob", pattern="*.py")]),
            Reply(error=ContextLengthExceeded("prompt too long")),
            Reply(text="short summary"),
            Reply(text="answer"),
        ]
    )
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.run_turn(text("go"))
    assert turn.stop_reason == StopReason.answered
    assert [i.summary_index for i in session.items if isinstance(i, ContextSummaryItem)] == [1]


def test_the_trigger_always_leaves_room_to_summarize() -> None:
    assert summary_trigger(100_000, 0.8, 4096) == 80_000
    assert summary_trigger(32_768, 0.95, 4096) == 32_768 - 4096 - 256
    # A small window keeps most of itself for work: the summary gets an eighth of it.
    assert summary_trigger(8192, 0.95, 4096) == 8192 - 1024 - 256
    assert summary_trigger(200_000, 40_000, 4096) == 40_000
