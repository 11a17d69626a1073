"""The method registry: every request and notification, with its payload types.

Names are `<resource>/<verb>`; over LSP they are prefixed with `opencomposer/`, over HTTP
each maps to one route. Payloads are `*Params` and `*Response`.
"""

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from opencomposer.agent.protocol.common import ApprovalPolicy, ProtocolModel
from opencomposer.agent.protocol.events import Event
from opencomposer.agent.protocol.items import (
    ApprovalDecision,
    ApprovalRequestItem,
    FileChange,
    UserInput,
)
from opencomposer.agent.protocol.threads import Thread, Turn, TurnLimits, TurnWithItems

MAX_SEQ = 2**63 - 1
"""The largest event `seq`: SQLite's INTEGER is 64-bit, and a bigger number given as
`after_seq` must be a clear invalid request, not a failure of the store."""


class ThreadStartParams(ProtocolModel):
    workspace: str
    """Workspace root; must be an existing directory on the server's allow-list."""

    title: str | None = None
    """Title for the thread; derived from the first request when absent."""

    model: str | None = None
    """Model id; the server's configured model when absent."""

    approval_policy: ApprovalPolicy | None = None
    """Restrictions on top of the server's configured policy, which always applies too: a
    client can make calls ask or be refused that would run, never the reverse. The
    server's policy alone when absent."""

    limits: TurnLimits | None = None
    """Limits for every turn of the thread, within the server's."""

    tools: list[str] | None = Field(default=None, min_length=1)
    """Only these tools, by name (an environment's tool set); every tool when absent."""


class ThreadStartResponse(ProtocolModel):
    thread: Thread
    """The new thread."""


class ThreadListParams(ProtocolModel):
    cursor: str | None = None
    """`next_cursor` of the previous page; None for the first (most recent) page."""

    limit: int = Field(default=50, ge=1, le=500)
    """Largest number of threads to return."""

    workspace: str | None = None
    """Only threads bound to this workspace folder (absolute path)."""


class ThreadListResponse(ProtocolModel):
    data: list[Thread]
    """Threads of this page, most recently updated first."""

    next_cursor: str | None = None
    """Pass as `cursor` to get the next page; None on the last page."""


class ThreadReadParams(ProtocolModel):
    thread_id: str
    """The thread to read."""


class ThreadReadResponse(ProtocolModel):
    thread: Thread
    """The thread."""

    turns: list[TurnWithItems]
    """Its turns in order, each with its items."""

    last_seq: int = Field(default=0, ge=0)
    """`seq` of the thread's last event when it was read: subscribe after it to follow the
    thread live from this snapshot."""


class ThreadSubscribeParams(ProtocolModel):
    thread_id: str
    """The thread to follow."""

    after_seq: int = Field(default=0, ge=0, le=MAX_SEQ)
    """Send its events with `seq` greater than this, then live ones (0: from the start)."""


class ThreadSubscribeResponse(ProtocolModel):
    last_seq: int = Field(ge=0)
    """`seq` of the thread's last event when the subscription started."""


class UndoScope(ProtocolModel):
    scope: Literal["edit", "turn", "thread"] = "turn"
    """The agent's last edit, a turn's edits (the last turn unless `turn_id`), or all of the
    thread's."""

    turn_id: str | None = None
    """With scope `turn`: which turn."""


class ThreadUndoParams(UndoScope):
    thread_id: str
    """The thread whose edits to undo."""


class ThreadUndoResponse(ProtocolModel):
    restored: list[FileChange]
    """Files put back, each as the change undoing made."""

    conflicts: list[str]
    """Files someone changed since the agent wrote them: left as they are."""

    unrestorable: list[str] = Field(default_factory=list)
    """Files the undone edits changed whose contents checkpoints do not keep, so undo cannot
    put them back: secret files (`.env`, `.env.*`), and files larger than
    `tools.checkpoint_max_bytes`."""


class ThreadEventsParams(ProtocolModel):
    thread_id: str
    """The thread whose log to read."""

    after_seq: int = Field(default=0, ge=0, le=MAX_SEQ)
    """Return events with `seq` greater than this (0: from the start)."""

    limit: int = Field(default=1000, ge=1, le=10000)
    """Largest number of events to return."""


class ThreadEventsResponse(ProtocolModel):
    events: list[Event]
    """Events in `seq` order."""

    has_more: bool = False
    """More events exist past the last one returned."""


class TurnStartInput(ProtocolModel):
    """`turn/start` less the thread (which HTTP names in the URL)."""

    input: list[UserInput] = Field(min_length=1)
    """The request: text and references, in order."""

    limits: TurnLimits | None = None
    """Limits for this turn only, within the thread's."""


class TurnStartParams(TurnStartInput):
    thread_id: str
    """The thread to run the turn in; it must have no running turn."""


class TurnStartResponse(ProtocolModel):
    turn: Turn
    """The turn as started; its progress arrives as events."""


class TurnInterruptParams(ProtocolModel):
    thread_id: str
    """The thread of the turn."""

    turn_id: str
    """The turn to interrupt."""


class TurnInterruptResponse(ProtocolModel):
    turn: Turn
    """The turn after interruption (status `interrupted`, or its final state if it had
    already ended)."""


class TurnSteerInput(ProtocolModel):
    """`turn/steer` less the thread and turn (which HTTP names in the URL)."""

    input: list[UserInput] = Field(min_length=1)
    """What to add: text and references, in order."""


class TurnSteerParams(TurnSteerInput):
    thread_id: str
    """The thread of the turn."""

    turn_id: str
    """The running turn to add input to."""


class TurnSteerResponse(ProtocolModel):
    item_id: str
    """The `user_message` item (with `steer` set) that carries the input."""


class ApprovalAnswer(ProtocolModel):
    """`approval/respond` less the thread and item (which HTTP names in the URL)."""

    decision: ApprovalDecision
    """The answer and its effect on the turn."""

    message: str | None = None
    """Note passed to the model with a denial."""


class ApprovalRespondParams(ApprovalAnswer):
    """A decision sent by a client whose transport cannot answer server requests (HTTP)."""

    thread_id: str
    """The thread of the approval request."""

    item_id: str
    """The `approval_request` item being answered."""


class ApprovalRespondResponse(ProtocolModel):
    item: ApprovalRequestItem
    """The approval item with its decision recorded."""


class ApprovalRequestParams(ProtocolModel):
    """Server -> client: may this tool call run?"""

    thread_id: str
    """The thread whose turn waits for the answer."""

    item: ApprovalRequestItem
    """The approval request, with what would happen and why it is asked."""


class ApprovalRequestResponse(ProtocolModel):
    decision: ApprovalDecision
    """The answer and its effect on the turn."""

    message: str | None = None
    """Note passed to the model with a denial."""


@dataclass(frozen=True)
class Method:
    name: str
    direction: Literal["client_to_server", "server_to_client"]
    kind: Literal["request", "notification"]
    params: Any
    """A model class or an annotated union such as `Event`."""

    result: Any | None
    doc: str


METHODS: tuple[Method, ...] = (
    Method(
        "thread/start",
        "client_to_server",
        "request",
        ThreadStartParams,
        ThreadStartResponse,
        "Create a thread bound to a workspace.",
    ),
    Method(
        "thread/list",
        "client_to_server",
        "request",
        ThreadListParams,
        ThreadListResponse,
        "List threads, most recently updated first.",
    ),
    Method(
        "thread/read",
        "client_to_server",
        "request",
        ThreadReadParams,
        ThreadReadResponse,
        "A thread with its turns and items.",
    ),
    Method(
        "thread/events",
        "client_to_server",
        "request",
        ThreadEventsParams,
        ThreadEventsResponse,
        "Replay a thread's events after a given seq.",
    ),
    Method(
        "thread/subscribe",
        "client_to_server",
        "request",
        ThreadSubscribeParams,
        ThreadSubscribeResponse,
        "Follow a thread: its events after a given seq, then live "
        "ones, as `event` notifications (HTTP: the thread's event stream).",
    ),
    Method(
        "thread/undo",
        "client_to_server",
        "request",
        ThreadUndoParams,
        ThreadUndoResponse,
        "Put back the agent's edits: its last edit, a turn's, or the "
        "thread's; files changed since are reported, not overwritten.",
    ),
    Method(
        "turn/start",
        "client_to_server",
        "request",
        TurnStartParams,
        TurnStartResponse,
        "Start a turn; its progress streams as events.",
    ),
    Method(
        "turn/interrupt",
        "client_to_server",
        "request",
        TurnInterruptParams,
        TurnInterruptResponse,
        "Stop a running turn: the model stream is closed, running "
        "commands are killed, open items complete as interrupted.",
    ),
    Method(
        "turn/steer",
        "client_to_server",
        "request",
        TurnSteerParams,
        TurnSteerResponse,
        "Add input to a running turn; the model sees it next step.",
    ),
    Method(
        "approval/respond",
        "client_to_server",
        "request",
        ApprovalRespondParams,
        ApprovalRespondResponse,
        "Answer an approval request (for transports without server-to-client requests).",
    ),
    Method(
        "approval/request",
        "server_to_client",
        "request",
        ApprovalRequestParams,
        ApprovalRequestResponse,
        "Ask the client whether a tool call may run.",
    ),
    Method(
        "event", "server_to_client", "notification", Event, None, "One event of a thread's log."
    ),
)

METHODS_BY_NAME = {method.name: method for method in METHODS}
