"""A thread's items in memory, changed only through its event log.

This is the narrow interface a turn works through: add an item, stream into it, complete it,
close what is still open, note an error, and read the prompt the items give the model. Each
change is one event, redacted and stored by the `ThreadLog` before anyone sees it, and the
item kept here is the one the event carried (secrets masked), as a resumed thread will have it.
"""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from opencomposer.agent.context import PromptView
from opencomposer.agent.eventlog import ThreadLog
from opencomposer.agent.protocol.common import ErrorInfo
from opencomposer.agent.protocol.events import ItemCompletedEvent, ItemStartedEvent
from opencomposer.agent.protocol.items import (
    ContextSummaryItem,
    ErrorItem,
    Item,
    ItemDelta,
    ItemFields,
    ItemStatus,
    ToolCallFields,
)
from opencomposer.serving.engines.base import ChatMessage

_NOT_FINISHED = "The call did not finish: the turn stopped first."
AnyItem = TypeVar("AnyItem", bound=ItemFields)


class ItemLog:
    def __init__(self, events: ThreadLog, system_prompt: str, items: Sequence[Item] = ()) -> None:
        self.events = events
        self.system_prompt = system_prompt
        self._items: list[Item] = list(items)
        self._index = {item.id: n for n, item in enumerate(self._items)}
        self._next_id = len(self._items) + 1
        self._version = 0  # bumped by every change: the prompt is rebuilt only then
        self._prompt: tuple[int, list[ChatMessage]] | None = None
        self._view = PromptView(system_prompt)
        self.summaries = sum(_is_summary(item) for item in self._items)
        """Completed context summaries: the segment a model call belongs to."""
        self._open: dict[str, Item] = {}
        self._partial: dict[str, list[str]] = {}

    @property
    def items(self) -> Sequence[Item]:
        """Every item of the thread, in log order (read-only: change them through the log)."""
        return self._items

    def item(self, item_id: str) -> Item:
        return self._items[self._index[item_id]]

    def new_id(self) -> str:
        item_id = f"item_{self._next_id}"
        self._next_id += 1
        return item_id

    def prompt(self) -> list[ChatMessage]:
        """The messages the log gives the model now (`context.build_messages`), built once per
        change of the log (a step both measures and sends it), and only for what changed since
        the last step (`context.PromptView`). Do not modify the list."""
        if self._prompt is None or self._prompt[0] != self._version:
            self._prompt = (self._version, self._view.messages(self._items))
        return self._prompt[1]

    def add(self, item: AnyItem, *, complete: bool = False) -> AnyItem:
        """Log a new item (started; and completed at once when `complete`). What is kept and
        returned is the item as logged: of the same type, secrets masked."""
        event = self.events.emit(ItemStartedEvent, item=item)
        assert isinstance(event, ItemStartedEvent)
        logged = event.item
        assert isinstance(logged, type(item))
        self._index[logged.id] = len(self._items)
        self._items.append(event.item)
        self._changed(len(self._items) - 1)
        self._open[logged.id] = event.item
        return self.complete(logged) if complete else logged

    def delta(self, item: ItemFields, delta: ItemDelta) -> None:
        """Stream more of an open item. What was streamed is kept until the item completes,
        so an item cut short (interrupt, engine failure) keeps it."""
        if item.id in self._open:
            self._partial.setdefault(item.id, []).append(delta.text)
            self.events.stream(item.turn_id, item.id, delta)

    def streamed(self, item_id: str) -> str:
        """What an open item has streamed so far."""
        return "".join(self._partial.get(item_id, ()))

    def complete(
        self, item: AnyItem, status: ItemStatus = ItemStatus.completed, **changes: Any
    ) -> AnyItem:
        current = self.item(item.id)
        data = {
            **current.model_dump(),
            **changes,
            "status": changes.get("status", status),
            "completed_at": datetime.now(UTC),
        }
        event = self.events.emit(ItemCompletedEvent, item=type(current).model_validate(data))
        assert isinstance(event, ItemCompletedEvent)
        final = event.item
        assert isinstance(final, type(item))
        self._items[self._index[item.id]] = event.item
        self._changed(self._index[item.id], before=current)
        self._open.pop(item.id, None)
        self._partial.pop(item.id, None)
        return final

    def _changed(self, index: int, before: Item | None = None) -> None:
        self._version += 1
        item = self._items[index]
        self._view.changed(index, item)
        self.summaries += _is_summary(item) - (before is not None and _is_summary(before))

    def note_error(self, turn_id: str, error: ErrorInfo) -> None:
        self.add(ErrorItem(id=self.new_id(), turn_id=turn_id, error=error), complete=True)

    def close_open(
        self, status: ItemStatus, note: str = "", only: Sequence[str] | None = None
    ) -> None:
        """End items still in progress (all, or those in `only`) after an interruption, a
        failure or a stop, keeping what they had streamed."""
        for item_id in list(self._open if only is None else only):
            if item_id not in self._open:
                continue
            item = self.item(item_id)
            partial = self.streamed(item_id)
            changes: dict[str, Any] = {}
            if isinstance(item, ToolCallFields):
                changes["output"] = (partial or _NOT_FINISHED) + note
            elif hasattr(item, "text"):
                changes["text"] = partial
            self.complete(item, status, **changes)


def _is_summary(item: Item) -> bool:
    return isinstance(item, ContextSummaryItem) and item.status == ItemStatus.completed
