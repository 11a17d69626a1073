"""How a turn ends when the model does not simply answer: cut at the step's token cap, stuck
repeating itself, interrupted; and what such a turn reports it used."""

import asyncio
from pathlib import Path

import pytest
from support.scripted_engine import Reply, ScriptedEngine

from opencomposer.agent.protocol.items import AgentMessageItem, ItemStatus, ReasoningItem
from opencomposer.agent.protocol.threads import StopReason, TurnStatus
from opencomposer.agent.repetition import TextLoopDetector
from opencomposer.serving.engines.errors import EngineServerError

from .conftest import text


def message(session) -> AgentMessageItem:
    return next(i for i in session.items if isinstance(i, AgentMessageItem))


async def test_a_step_cut_by_its_token_cap_ends_the_turn_with_its_own_reason(
    make_runtime, repo: Path
) -> None:
    engine = ScriptedEngine([Reply(text="The fix is to chan", finish_reason="length")])
    session = await make_runtime(engine, max_step_tokens=64).start_thread(repo)
    turn = await session.run_turn(text("fix it"))
    assert (turn.status, turn.stop_reason) == (TurnStatus.completed, StopReason.max_step_tokens)
    assert engine.requests[0].sampling.max_tokens == 64
    assert message(session).text == "The fix is to chan"


@pytest.mark.parametrize(("window", "cap"), [(8_192, 2_048), (12_000, 3_000), (131_072, 8_192)])
async def test_the_step_cap_is_a_quarter_of_the_window_unless_configured(
    make_runtime, repo: Path, window: int, cap: int
) -> None:
    engine = ScriptedEngine([Reply(text="ok")], context_window=window)
    session = await make_runtime(engine).start_thread(repo)
    await session.run_turn(text("hi"))
    assert engine.requests[0].sampling.max_tokens == cap


# What small models loop on: one line, a few words, one character, a long paragraph.
LOOPS = [
    "I will check the file.\n",
    "the the ",
    "=",
    "Let me think about the structure of this repository once more: the tests import "
    "calc, calc defines add, and add subtracts. ",
]


@pytest.mark.parametrize("piece", LOOPS, ids=["line", "words", "char", "paragraph"])
async def test_text_stuck_in_a_loop_stops_the_step_early(
    make_runtime, repo: Path, piece: str
) -> None:
    looping = "Looking at calc.py first.\n" + piece * (20_000 // len(piece))
    engine = ScriptedEngine([Reply(text=looping)])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.run_turn(text("fix it"))

    assert (turn.status, turn.stop_reason) == (TurnStatus.completed, StopReason.repeated_text)
    assert engine.closed_mid_stream == 1  # the engine was told to stop generating
    said = message(session)
    assert said.status == ItemStatus.completed
    assert said.text.startswith("Looking at calc.py first.\n" + piece * 2)
    assert len(said.text) < 2_000 + len(piece) * 4  # cut soon after the loop was plain
    (record,) = session.store.model_calls(session.thread.id)  # kept, as training wants it
    assert record["response"]["finish_reason"] == "repetition"
    assert record["response"]["text"] == said.text


async def test_reasoning_stuck_in_a_loop_stops_the_step_too(make_runtime, repo: Path) -> None:
    engine = ScriptedEngine([Reply(reasoning="Hmm, wait. " * 2_000, text="never reached")])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.run_turn(text("fix it"))
    assert turn.stop_reason == StopReason.repeated_text
    reasoning = next(i for i in session.items if isinstance(i, ReasoningItem))
    assert len(reasoning.text) < 2_000
    assert not any(isinstance(i, AgentMessageItem) for i in session.items)


async def test_loop_detection_is_off_when_set_to_zero(make_runtime, repo: Path) -> None:
    looping = "ok " * 1_000
    session = await make_runtime([Reply(text=looping)], repeated_text_chars=0).start_thread(repo)
    turn = await session.run_turn(text("say ok a thousand times"))
    assert turn.stop_reason == StopReason.answered
    assert message(session).text == looping


@pytest.mark.parametrize(
    "varied",
    [
        "".join(f"{n}. step {n}\n" for n in range(600)),  # a numbered list
        "".join(f"| {n:>4} | {n * n:>8} |\n" for n in range(400)),  # a table
        "".join(f"    assert add({n}, 1) == {n + 1}\n" for n in range(300)),  # code
    ],
    ids=["numbered", "table", "code"],
)
def test_long_regular_text_that_varies_is_not_a_loop(varied: str) -> None:
    detector = TextLoopDetector(600)
    assert not any(detector.feed(varied[i : i + 7]) for i in range(0, len(varied), 7))


def test_a_loop_is_found_whatever_the_pieces_the_stream_arrives_in() -> None:
    looping = "abc\n" * 50 + "we need to read the file again. " * 60
    for size in (1, 3, 50, 500, 5_000):
        detector = TextLoopDetector(600)
        found = [detector.feed(looping[i : i + size]) for i in range(0, len(looping), size)]
        assert any(found), size
        assert detector.period() == len("we need to read the file again. ")


async def test_an_interrupted_call_counts_with_its_usage_estimated(make_runtime, repo) -> None:
    engine = ScriptedEngine([Reply(text="a long answer that never ends", hang_after=3)])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.start_turn(text("hi"))
    async with asyncio.timeout(10):
        while not any(isinstance(i, AgentMessageItem) for i in session.items):
            await asyncio.sleep(0.01)
    ended = await session.interrupt(turn.id)
    assert ended.stop_reason == StopReason.interrupted
    usage = ended.usage
    assert (usage.model_calls, usage.estimated) == (1, True)
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0


async def test_calls_that_fail_mid_stream_count_and_their_retries_too(make_runtime, repo) -> None:
    broken = EngineServerError("upstream went away")
    engine = ScriptedEngine(
        [
            Reply(text="partial answer", error=broken, fail_after=2),
            Reply(text="done"),
        ]
    )
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.run_turn(text("hi"))
    assert turn.stop_reason == StopReason.answered
    assert (turn.usage.model_calls, turn.usage.estimated) == (2, True)


async def test_an_engine_that_reports_no_usage_gets_an_estimate(make_runtime, repo) -> None:
    engine = ScriptedEngine([Reply(text="x" * 400, reports_usage=False)])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.run_turn(text("hi"))
    usage = turn.usage
    assert (usage.model_calls, usage.estimated) == (1, True)
    assert 50 <= usage.completion_tokens <= 400
    assert usage.prompt_tokens > 0


async def test_usage_the_engine_reported_is_not_marked_estimated(make_runtime, repo) -> None:
    engine = ScriptedEngine([Reply(text="done", usage=(120, 7))])
    session = await make_runtime(engine).start_thread(repo)
    turn = await session.run_turn(text("hi"))
    usage = turn.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.model_calls) == (120, 7, 1)
    assert usage.estimated is False
