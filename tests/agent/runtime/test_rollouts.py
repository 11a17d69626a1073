"""`run_rollouts`: 32 rollouts in one runtime, each with its own workspace, limits and tool set,
at most `concurrency` at once; one that cannot run is its own result, and every finished
rollout's session is let go."""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from opencomposer.agent.protocol.items import ErrorItem, FileReadItem, ToolCallItem
from opencomposer.agent.protocol.threads import StopReason, TurnLimits, TurnStatus
from opencomposer.agent.rollouts import RolloutSpec, run_rollouts
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings
from opencomposer.serving.engines.base import (
    EngineEvent,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ToolCall,
    Usage,
)
from opencomposer.serving.engines.replay import stream_events

READS = 3  # steps that read before the answer


class ReadThreeTimes:
    """Every thread reads its note three times, then answers with the last thing it read;
    counts how many requests are in flight at once."""

    name = "scripted"

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def models(self) -> list[ModelInfo]:
        return [ModelInfo(id="scripted-model", context_window=32_768)]

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            done = sum(message.role == "assistant" for message in request.messages)
            if done < READS:
                arguments = json.dumps({"path": "note.txt"})
                call = ToolCall(id=f"call_{done}", name="read_file", arguments=arguments)
                result = GenerationResult(tool_calls=[call], finish_reason="tool_calls")
            else:
                result = GenerationResult(text=f"read: {request.messages[-1].content}")
            result.usage = Usage(10, 5)
            for event in stream_events(result):
                await asyncio.sleep(0.001)  # the rollouts' streams interleave
                yield event
        finally:
            self.running -= 1

    async def aclose(self) -> None:
        return None


async def test_thirty_two_rollouts_keep_their_own_limits_tools_and_failures(
    tmp_path: Path,
) -> None:
    engine = ReadThreeTimes()
    runtime = AgentRuntime(Settings(home=tmp_path / "home", models_dir=tmp_path / "models"), engine)
    specs = []
    for n in range(32):
        workspace = tmp_path / f"ws{n}"
        workspace.mkdir()
        (workspace / "note.txt").write_text(f"note {n}\n")
        specs.append(
            RolloutSpec(
                workspace=workspace,
                prompt=f"rollout {n}",
                # A quarter stop after two steps; a quarter are offered no read_file.
                limits=TurnLimits(max_steps=2) if n % 4 == 1 else None,
                tools=["grep"] if n % 4 == 2 else None,
            )
        )
    specs.append(RolloutSpec(workspace=tmp_path / "gone", prompt="nothing to see"))

    try:
        results = await run_rollouts(runtime, specs, concurrency=8)

        assert engine.most <= 8
        assert [result.spec for result in results] == specs
        for n, result in enumerate(results[:32]):
            assert result.error is None, result.error
            assert result.turn is not None and result.turn.status == TurnStatus.completed
            if n % 4 == 1:
                assert result.turn.stop_reason == StopReason.max_steps
                assert result.turn.usage.model_calls == 2
                continue
            assert result.turn.stop_reason == StopReason.answered
            assert result.turn.usage.model_calls == READS + 1
            answer = result.items[-1]
            assert not any(isinstance(i, ErrorItem) for i in result.items)
            if n % 4 == 2:
                # Not offered, so not run: the model is told which tools this rollout has.
                refused = [i for i in result.items if isinstance(i, ToolCallItem)]
                assert len(refused) == READS and all(i.error is not None for i in refused)
                assert not any(isinstance(i, FileReadItem) for i in result.items)
                assert "Available tools: grep." in answer.text
                continue
            reads = [i for i in result.items if isinstance(i, FileReadItem)]
            assert len(reads) == READS
            # Each rollout read its own note, and only its own.
            assert all((i.output or "").endswith(f"\tnote {n}") for i in reads)
            assert answer.text.startswith("read: ") and answer.text.endswith(f"\tnote {n}")
        gone = results[32]
        assert gone.turn is None and gone.thread_id is None
        assert gone.error is not None and "gone" in gone.error
        assert runtime.running_turns() == 0
        assert runtime._sessions == {}  # every rollout's session was let go
        # The threads stay in the store, readable after the run.
        assert len(runtime.list_threads(limit=100)[0]) == 32
    finally:
        await runtime.close()
