"""Events: what a server streams to clients, one append-only sequence per thread.

`seq` numbers a thread's events from 1 with no gaps. It is the SSE event id, so a client that
reconnects with `Last-Event-ID` gets exactly the events it missed; LSP clients use it the same
way. The log of these events is the source of truth: UI replay, resume and training export
all read it.
"""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from opencomposer.agent.protocol.common import ProtocolModel, utc_now
from opencomposer.agent.protocol.items import Item, ItemDelta
from opencomposer.agent.protocol.threads import Thread, Turn


class EventFields(ProtocolModel):
    seq: int = Field(ge=1)
    """Position in the thread's event log, from 1, without gaps."""

    thread_id: str
    """The thread whose log holds the event."""

    at: datetime = Field(default_factory=utc_now)
    """When the event was appended to the log."""


class ThreadStartedEvent(EventFields):
    type: Literal["thread.started"] = "thread.started"
    thread: Thread
    """The new thread."""


class TurnStartedEvent(EventFields):
    type: Literal["turn.started"] = "turn.started"
    turn: Turn
    """The turn as started."""


class ItemStartedEvent(EventFields):
    type: Literal["item.started"] = "item.started"
    item: Item
    """The item in its initial state."""


class ItemDeltaEvent(EventFields):
    type: Literal["item.delta"] = "item.delta"
    turn_id: str
    """The turn of the item."""

    item_id: str
    """The item the delta extends."""

    delta: ItemDelta
    """What to append to the item."""


class ItemCompletedEvent(EventFields):
    type: Literal["item.completed"] = "item.completed"
    item: Item
    """The item's final state; it replaces what the client assembled from deltas."""


class TurnCompletedEvent(EventFields):
    type: Literal["turn.completed"] = "turn.completed"
    turn: Turn
    """The turn's final state: status, stop reason, usage."""


Event = Annotated[
    ThreadStartedEvent
    | TurnStartedEvent
    | ItemStartedEvent
    | ItemDeltaEvent
    | ItemCompletedEvent
    | TurnCompletedEvent,
    Field(discriminator="type"),
]
