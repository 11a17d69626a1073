"""The agent behind a plain chat completion: model `opencomposer-agent` with an
`X-Opencomposer-Thread` header runs one agent turn in that thread, so any OpenAI client can
chat with the agent.

`AgentChatEngine` presents a thread as an engine: the last user message starts a turn, the
agent's own words stream as text, and each tool call shows up as one line saying what it did
and how it ended. Nobody on a chat completion can answer approvals, so calls the policy asks
about are denied (and the agent is told). The thread's log keeps everything, as for any turn.
"""

from collections.abc import AsyncGenerator

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.events import Event
from opencomposer.agent.protocol.items import ItemStatus, TextInput, ToolCallFields
from opencomposer.agent.protocol.methods import TurnStartParams
from opencomposer.agent.protocol.threads import TurnStatus
from opencomposer.agent.tool_items import describe_call
from opencomposer.serving.engines.base import (
    EngineEvent,
    Finished,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    TextDelta,
    Usage,
    Weights,
)
from opencomposer.serving.engines.errors import EngineRequestError, EngineServerError

AGENT_MODEL = "opencomposer-agent"
THREAD_HEADER = "x-opencomposer-thread"
_MARKS = {
    ItemStatus.completed: "done",
    ItemStatus.failed: "failed",
    ItemStatus.declined: "not approved",
    ItemStatus.interrupted: "interrupted",
}


class AgentChatEngine:
    name = "agent"

    def __init__(self, api: AgentAPI, thread_id: str) -> None:
        self.api = api
        self.thread_id = thread_id

    async def models(self) -> list[ModelInfo]:
        return [ModelInfo(id=AGENT_MODEL, owned_by="opencomposer")]

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        users = [m for m in request.messages if m.role == "user" and m.content]
        text = users[-1].content if users else ""
        params = TurnStartParams(thread_id=self.thread_id, input=[TextInput(text=text or "")])
        answer: list[str] = []
        kinds: dict[str, str] = {}  # item id -> item type, to tell answers from thinking
        async with await self.api.stream_turn(params, answers_approvals=False) as stream:
            async for event in stream:
                if event.type == "item.started":
                    kinds[event.item.id] = event.item.type
                for piece in _pieces(event, kinds):
                    answer.append(piece)
                    yield TextDelta(piece)
        ended = stream.ended
        if ended is None:
            raise EngineServerError("the agent turn did not finish: the server is stopping")
        if ended.status == TurnStatus.failed and ended.error is not None:
            raise EngineServerError(f"the agent turn failed: {ended.error.message}")
        usage = Usage(
            ended.usage.prompt_tokens,
            ended.usage.completion_tokens,
            ended.usage.cached_prompt_tokens,
        )
        yield Finished(
            GenerationResult(
                text="".join(answer), usage=usage, model=AGENT_MODEL, finish_reason="stop"
            )
        )

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        raise EngineRequestError(
            f"{AGENT_MODEL} is the agent, not a model: update the weights of the engine it runs on"
        )

    async def aclose(self) -> None:
        return None


def _pieces(event: Event, kinds: dict[str, str]) -> list[str]:
    """The text a turn event adds to the chat: the agent's words, and a line per tool call."""
    if event.type == "item.delta" and event.delta.kind == "text":
        return [event.delta.text] if kinds.get(event.item_id) == "agent_message" else []
    if event.type == "item.completed" and isinstance(event.item, ToolCallFields):
        item = event.item
        return [f"\n[{describe_call(item)}: {_MARKS.get(item.status, item.status.value)}]\n"]
    if event.type == "turn.completed" and event.turn.status == TurnStatus.interrupted:
        return ["\n[the turn was interrupted]\n"]
    return []
