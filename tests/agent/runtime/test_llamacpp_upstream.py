"""Agent turns through the `openai` backend and a fake llama-cpp-python upstream that behaves
as the real one does (tests/support/streams/llamacpp*): it cannot stream a tool call it
chose, sends no usage while streaming, names its model after the file, and breaks a stream
whose prompt is over its window."""

from pathlib import Path

import pytest
from support.fake_openai import Compose, HangUp, Replay, Status, Whole, recorded

from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    ContextSummaryItem,
    FileReadItem,
    ItemStatus,
)
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings
from opencomposer.serving.engines.openai import OpenAIEngine

from .conftest import text

GGUF = "/models/SmolLM2-135M-Instruct-Q8_0.gguf"


def runtime_over(fake, tmp_path: Path, context_window: int | None = 8192) -> AgentRuntime:
    """A runtime whose engine is the `openai` backend over `fake`, llama-cpp-python's way
    (its window configured, since it says none)."""
    fake.models = recorded("llamacpp_python_models")["data"]
    settings = Settings(
        home=tmp_path / "home",
        models_dir=tmp_path / "models",
        engine={
            "backend": "openai",
            "base_url": fake.base_url,
            "model_aliases": {"smollm2": GGUF},
            "model": "smollm2",
            "context_window": context_window,
            "max_retries": 0,
        },
        agent={"max_wall_time": 60},
    )
    return AgentRuntime(settings, OpenAIEngine(settings.engine))


@pytest.mark.parametrize(
    "unstreamable",
    [Replay("llamacpp_python_empty"), HangUp()],
    ids=["empty-stream", "hung-up"],  # the second is what llama-cpp-python 0.3.36 really does
)
async def test_a_turn_calls_a_tool_that_the_upstream_cannot_stream(
    fake, repo, tmp_path, unstreamable
):
    fake.enqueue(
        unstreamable,  # the streamed step that chose read_file
        Whole("llamacpp_python_tool_reply"),
        Whole("llamacpp_python_text_reply"),
    )
    runtime = runtime_over(fake, tmp_path)
    try:
        session = await runtime.start_thread(repo)
        turn = await session.run_turn(text("what does calc.py define?"))
    finally:
        await runtime.close()

    assert (turn.status, turn.stop_reason) == (TurnStatus.completed, StopReason.answered)
    read, answer = session.items[1:]
    assert isinstance(read, FileReadItem)
    assert (read.path, read.status, read.total_lines) == ("calc.py", ItemStatus.completed, 2)
    assert isinstance(answer, AgentMessageItem) and answer.text == "calc.py defines add(a, b)."
    # Both steps' usage is the upstream's own, none estimated.
    usage = turn.usage
    assert (usage.model_calls, usage.prompt_tokens, usage.completion_tokens) == (2, 867, 20)
    assert not usage.estimated
    # One streamed try, then every request with tools goes whole, under the file's name.
    bodies = [request["body"] for request in fake.requests]
    assert [b.get("stream", False) for b in bodies] == [True, False, False]
    assert {b["model"] for b in bodies} == {GGUF}
    assert "return a - b" in bodies[2]["messages"][-1]["content"]
    # The step that called the tool goes back with "" for its content, not null, which
    # llama-cpp-python's request model refuses (a 500 on the turn's second step).
    called = bodies[2]["messages"][-2]
    assert (called["role"], called["content"], len(called["tool_calls"])) == ("assistant", "", 1)


async def test_a_stream_broken_by_an_overlong_prompt_is_summarized_and_retried(
    fake, repo, tmp_path
):
    # llama.cpp's own server: it streams tool calls, says its window in /props (8192), and
    # breaks the stream of a prompt over it.
    (repo / "big.txt").write_text("".join(f"line {n:05d} of a long file\n" for n in range(900)))
    runtime = runtime_over(fake, tmp_path, context_window=None)
    fake.models = recorded("llamacpp_models")["data"]
    fake.props = recorded("llamacpp_props")
    too_long = Status(400, recorded("llamacpp_overflow"))
    fake.enqueue(
        Compose(calls=[("read_file", {"path": "big.txt"})]),
        # The step that holds big.txt: a stream with nothing in it, asked again whole.
        Replay("llamacpp_overflow_error"),
        too_long,
        # Asked to summarize that, which is too long as well.
        Replay("llamacpp_overflow_error"),
        too_long,
        Compose("big.txt is 900 numbered lines."),
    )
    try:
        session = await runtime.start_thread(repo)
        turn = await session.run_turn(text("read big.txt"))
    finally:
        await runtime.close()

    assert (turn.status, turn.stop_reason) == (TurnStatus.completed, StopReason.answered)
    summaries = [i for i in session.items if isinstance(i, ContextSummaryItem)]
    assert [(s.method, s.status) for s in summaries] == [("truncation", ItemStatus.completed)]
    assert "context_overflow" in summaries[0].text
    final = session.items[-1]
    assert isinstance(final, AgentMessageItem) and final.text == "big.txt is 900 numbered lines."
    assert [bool(r["body"].get("stream")) for r in fake.requests] == [
        True,
        True,
        False,
        True,
        False,
        True,
    ]
    # The retried step starts again from the summary, without the file's content.
    retried = fake.requests[-1]["body"]["messages"]
    assert not any("line 00899" in (m.get("content") or "") for m in retried)
