"""The prompt as a view of the item log.

`build_messages` turns a thread's items into the chat messages sent to the engine, and is the
only place that does: a resumed thread, a rollout and a live turn all see the same prompt for
the same log. After a self-summarization step the context restarts: the system prompt, every
user message before the summary verbatim, then the summary with the conversation state, then
whatever came after it. Each model step becomes one assistant message (text, reasoning and tool
calls as the model wrote them, so the engine's prefix cache keeps matching), followed by one
tool message per call. The runtime logs input added to a running turn only between steps, so
the log order is the order the model saw.
"""

from collections.abc import Sequence

from opencomposer.agent.prompting import render
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    ContextSummaryItem,
    FileChangeItem,
    FileReadItem,
    FileReference,
    Item,
    ItemStatus,
    ReasoningItem,
    TextInput,
    TodoEntry,
    TodoListItem,
    TodoStatus,
    ToolCallFields,
    UserMessageItem,
)
from opencomposer.serving.engines.base import ChatMessage, ToolCall

# Paths listed in the state block and the turn context; older ones are dropped.
MAX_LISTED_FILES = 20
_CHECKBOX = {TodoStatus.pending: " ", TodoStatus.in_progress: "~", TodoStatus.completed: "x"}
_NOT_RUN = "The call did not run: the turn was interrupted first."


def render_user(item: UserMessageItem, *, with_context: bool = True) -> str:
    """A user message as the model reads it: text and references in order, then the
    environment facts attached when its turn started."""
    parts = []
    for entry in item.content:
        if isinstance(entry, TextInput):
            parts.append(entry.text)
        else:
            parts.append(_reference(entry))
    if with_context and item.context:
        parts.append(item.context)
    return "\n\n".join(parts)


def _reference(ref: FileReference) -> str:
    lines = f" lines={ref.range.start}-{ref.range.end}" if ref.range else ""
    note = f" note={ref.note!r}" if ref.note else ""
    body = f"\n{ref.text}\n" if ref.text is not None else ""
    return f'<file path="{ref.path}"{lines}{note}>{body}</file>'


def last_summary(items: Sequence[Item]) -> int | None:
    """Index of the most recent completed context_summary item."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, ContextSummaryItem) and item.status == ItemStatus.completed:
            return index
    return None


def build_messages(system_prompt: str, items: Sequence[Item]) -> list[ChatMessage]:
    messages = [ChatMessage(role="system", content=system_prompt)]
    start = 0
    cut = last_summary(items)
    if cut is not None:
        summary = items[cut]
        assert isinstance(summary, ContextSummaryItem)
        messages.extend(
            ChatMessage(role="user", content=render_user(item, with_context=False))
            for item in items[:cut]
            if isinstance(item, UserMessageItem)
        )
        messages.append(
            ChatMessage(
                role="user",
                content=render(
                    "summary_context", method=summary.method, text=summary.text, state=summary.state
                ),
            )
        )
        start = cut + 1
    # A summary step's thinking belongs to the summary, not to the conversation.
    summary_steps = {(i.turn_id, i.step) for i in items if isinstance(i, ContextSummaryItem)}
    messages.extend(_conversation(items[start:], summary_steps))
    return messages


def _conversation(items: Sequence[Item], skip: set[tuple[str, int | None]]) -> list[ChatMessage]:
    steps: dict[tuple[str, int], list[Item]] = {}
    for item in items:
        if item.step is not None and (item.turn_id, item.step) not in skip and _in_prompt(item):
            steps.setdefault((item.turn_id, item.step), []).append(item)
    messages: list[ChatMessage] = []
    for item in items:
        if isinstance(item, UserMessageItem):
            messages.append(ChatMessage(role="user", content=render_user(item)))
        elif (key := (item.turn_id, item.step)) in steps:
            assistant, results = _step_messages(steps.pop(key))
            messages.append(assistant)
            messages.extend(results)
    return messages


def _in_prompt(item: Item) -> bool:
    """Model output that failed (an engine error mid-stream) is not shown to the model again;
    interrupted output is, as far as it got."""
    if isinstance(item, AgentMessageItem | ReasoningItem):
        return item.status != ItemStatus.failed
    return isinstance(item, ToolCallFields)


def _step_messages(items: list[Item]) -> tuple[ChatMessage, list[ChatMessage]]:
    text = "".join(i.text for i in items if isinstance(i, AgentMessageItem))
    reasoning = "".join(i.text for i in items if isinstance(i, ReasoningItem))
    calls = [i for i in items if isinstance(i, ToolCallFields)]
    assistant = ChatMessage(
        role="assistant",
        content=text or None,
        reasoning=reasoning or None,
        tool_calls=[ToolCall(id=c.call_id, name=c.tool, arguments=c.arguments_text) for c in calls],
    )
    results = [ChatMessage(role="tool", tool_call_id=c.call_id, content=_result(c)) for c in calls]
    return assistant, results


def _result(call: ToolCallFields) -> str:
    if call.output is not None:
        return call.output
    if call.error is not None:
        return call.error.message
    return _NOT_RUN


# --------------------------------------------------------------------------- state


def touched_files(items: Sequence[Item]) -> tuple[list[str], list[str]]:
    """(edited, viewed) workspace paths, most recent first, each listed once."""
    edited: dict[str, None] = {}
    viewed: dict[str, None] = {}
    for item in reversed(items):
        if isinstance(item, FileChangeItem) and item.status == ItemStatus.completed:
            for change in item.changes:
                edited.setdefault(change.move_to or change.path, None)
        elif isinstance(item, FileReadItem) and item.status == ItemStatus.completed:
            viewed.setdefault(item.path, None)
    viewed_only = [path for path in viewed if path not in edited]
    return list(edited)[:MAX_LISTED_FILES], viewed_only[:MAX_LISTED_FILES]


def current_todos(items: Sequence[Item]) -> list[TodoEntry]:
    for item in reversed(items):
        if isinstance(item, TodoListItem) and item.status == ItemStatus.completed:
            return item.todos
    return []


def conversation_state(items: Sequence[Item], summary_count: int) -> str:
    """The state block kept verbatim beside a summary: plan, files touched, summary count."""
    edited, viewed = touched_files(items)
    return render(
        "state",
        summary_count=summary_count,
        todos=current_todos(items),
        marks=_CHECKBOX,
        edited=edited,
        viewed=viewed,
    )


def summary_count(items: Sequence[Item]) -> int:
    return sum(
        isinstance(i, ContextSummaryItem) and i.status == ItemStatus.completed for i in items
    )
