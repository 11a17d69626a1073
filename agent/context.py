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
    cut = last_summary(items)
    start = 0 if cut is None else cut + 1
    return [
        *_head(system_prompt, items, cut),
        *_conversation(items[start:], _summary_steps(items)),
    ]


StepKey = tuple[str, int]


class PromptView:
    """`build_messages` of a growing log, at a cost that does not grow with it.

    A step's prompt is the previous one plus what the step added, so the messages of every
    item up to the first one still in progress are kept ("settled"), and each call builds only
    the messages of the items after them. Settled messages are the same objects from step to
    step, which lets the meter and the model-call record find the shared prefix by identity.
    What would change a settled message starts over from the whole log: a change to a settled
    item, a context summary (it restarts the context), or a step whose items are not
    contiguous. The result is always equal to `build_messages` of the same items.
    """

    def __init__(self, system_prompt: str) -> None:
        self.system_prompt = system_prompt
        self._restart()

    def _restart(self) -> None:
        self._ready = False
        self._head: list[ChatMessage] = []  # the system prompt, and a summary's context
        self._skip: set[tuple[str, int | None]] = set()
        self._settled: list[ChatMessage] = []
        self._settled_end = 0  # items before this index have their messages in _settled
        self._settled_steps: set[StepKey] = set()

    def changed(self, index: int, item: Item) -> None:
        """Item `index` of the log was added or replaced by `item`."""
        if index < self._settled_end or isinstance(item, ContextSummaryItem):
            self._restart()

    def messages(self, items: Sequence[Item]) -> list[ChatMessage]:
        """The prompt for `items` (a new list each time; its messages must not be modified)."""
        if not self._ready:
            self._begin(items)
        end = self._settle(items)
        tail = items[end:] if end >= 0 else ()
        if end < 0 or any(_step_key(item) in self._settled_steps for item in tail):
            self._restart()  # a step on both sides of the boundary: rare, start over next time
            return build_messages(self.system_prompt, items)
        return [*self._head, *self._settled, *_conversation(tail, self._skip)]

    def _begin(self, items: Sequence[Item]) -> None:
        cut = last_summary(items)
        self._head = _head(self.system_prompt, items, cut)
        self._skip = _summary_steps(items)
        self._settled_end = 0 if cut is None else cut + 1
        self._ready = True

    def _settle(self, items: Sequence[Item]) -> int:
        """Move the settled boundary over the items that are done, keeping a step's items on
        one side of it; -1 when a newly settled item continues a settled step."""
        start = end = self._settled_end
        while end < len(items) and items[end].status != ItemStatus.in_progress:
            end += 1
        # The step at the boundary (or the last one, which may still grow) is settled once
        # the next step has begun.
        last = items[end] if end < len(items) else items[end - 1] if end > start else None
        step = None if last is None else _step_key(last)
        while step is not None and end > start and _step_key(items[end - 1]) == step:
            end -= 1
        if end == start:
            return end
        keys = {key for item in items[start:end] if (key := _step_key(item)) is not None}
        if keys & self._settled_steps:
            return -1
        self._settled.extend(_conversation(items[start:end], self._skip))
        self._settled_steps |= keys
        self._settled_end = end
        return end


def _step_key(item: Item) -> StepKey | None:
    return None if item.step is None else (item.turn_id, item.step)


def _head(system_prompt: str, items: Sequence[Item], cut: int | None) -> list[ChatMessage]:
    """The messages before the conversation: the system prompt, then after a summary every
    earlier user message verbatim and the summary with the conversation state."""
    messages = [ChatMessage(role="system", content=system_prompt)]
    if cut is None:
        return messages
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
    return messages


def _summary_steps(items: Sequence[Item]) -> set[tuple[str, int | None]]:
    """A summary step's thinking belongs to the summary, not to the conversation."""
    return {(i.turn_id, i.step) for i in items if isinstance(i, ContextSummaryItem)}


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
