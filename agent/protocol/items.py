"""Items: the units a turn is made of, and the deltas that stream them.

Every item goes `item.started` -> `item.delta`* -> `item.completed`; the completed item is
authoritative and replaces whatever a client assembled from deltas. A tool call starts once
the model has written its whole call, so it starts with its arguments (the command, the path).
Tool calls share one set of fields (`ToolCallFields`) and come in specialised views that
clients can render richly (a command with its output, a file change as a diff, a todo list);
`tool_call` is the plain view for any other tool.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from opencomposer.agent.protocol.common import (
    ActionClass,
    ErrorInfo,
    LineRange,
    ProtocolModel,
    utc_now,
)

# --------------------------------------------------------------------------- user input


class TextInput(ProtocolModel):
    type: Literal["text"] = "text"
    text: str
    """What the user typed."""


class FileReference(ProtocolModel):
    """A file (or part of one) the user points the agent at: a selection, a diagnostic."""

    type: Literal["file"] = "file"
    path: str
    """Path relative to the workspace root (absolute paths inside it are accepted)."""

    range: LineRange | None = None
    """Lines the reference is about; the whole file when absent."""

    text: str | None = None
    """The referenced text as the user saw it (e.g. from an unsaved buffer)."""

    note: str | None = None
    """Why it is referenced, e.g. a diagnostic message."""


UserInput = Annotated[TextInput | FileReference, Field(discriminator="type")]

# --------------------------------------------------------------------------- items


class ItemStatus(StrEnum):
    """Where an item is in its life.

    - `in_progress`: Started; deltas may follow.
    - `completed`: Finished normally.
    - `failed`: Finished with an error (see `error`).
    - `interrupted`: Cut short because the turn was interrupted; holds what was produced until
      then.
    - `declined`: Not run because an approval was denied or the policy refused it.
    """

    in_progress = "in_progress"
    completed = "completed"
    failed = "failed"
    interrupted = "interrupted"
    declined = "declined"


class ItemFields(ProtocolModel):
    id: str
    """Unique within the thread."""

    turn_id: str
    """The turn this item belongs to."""

    status: ItemStatus = ItemStatus.in_progress
    """Lifecycle state; `in_progress` until the item completes."""

    started_at: datetime = Field(default_factory=utc_now)
    """When the item started."""

    completed_at: datetime | None = None
    """When the item reached a final status; None while in progress."""

    step: int | None = None
    """The model step (engine call) of the turn that produced the item, from 1; items of one
    step form one assistant message. None for items the model did not produce."""


class UserMessageItem(ItemFields):
    type: Literal["user_message"] = "user_message"
    content: list[UserInput]
    """Text and references, in the order the user gave them."""

    steer: bool = False
    """True when added to a turn that was already running; the model sees it at its next
    step."""

    context: str | None = None
    """Facts the runtime attached for the model when the turn started: git status, recently
    viewed and edited files. Clients usually show it collapsed."""


class AgentMessageItem(ItemFields):
    type: Literal["agent_message"] = "agent_message"
    text: str = ""
    """The model's visible answer, as streamed so far (complete once completed)."""


class ReasoningItem(ItemFields):
    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    """The model's thinking. Clients usually show it collapsed."""


class ToolCallFields(ItemFields):
    call_id: str
    """The id the model gave the call; its result is returned under the same id."""

    tool: str
    """Tool name as declared to the model."""

    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments as parsed from the model's call (empty when they are not a JSON object)."""

    arguments_text: str = ""
    """The arguments exactly as the model wrote them, valid or not; prompts replay this text."""

    action_class: ActionClass | None = None
    """The harness's risk classification of this call, once known."""

    output: str | None = None
    """The result text returned to the model (capped, secrets redacted)."""

    error: ErrorInfo | None = None
    """Why the call failed, as also told to the model."""

    duration_ms: int | None = None
    """Wall time the tool took to run."""


class ToolCallItem(ToolCallFields):
    """Any tool call without a specialised view."""

    type: Literal["tool_call"] = "tool_call"


class CommandExecutionItem(ToolCallFields):
    type: Literal["command_execution"] = "command_execution"
    command: str = ""
    """The shell command as run."""

    cwd: str = "."
    """Working directory, relative to the workspace root."""

    exit_code: int | None = None
    """Exit status; None while running, for background jobs and when killed."""

    timed_out: bool = False
    """The soft timeout returned control while the command was still running."""

    background_id: str | None = None
    """Id of the background job, when the command keeps running after the call returns."""

    sandbox: str | None = None
    """Isolation the command ran under, e.g. `bubblewrap`, or the weaker fallback."""


class FileChangeKind(StrEnum):
    """What happened to a file."""

    add = "add"
    update = "update"
    delete = "delete"
    move = "move"


class FileChange(ProtocolModel):
    path: str
    """Path relative to the workspace root."""

    kind: FileChangeKind
    diff: str = ""
    """Unified diff of the change (empty for binary files)."""

    move_to: str | None = None
    """New path, for moves."""


class FileChangeItem(ToolCallFields):
    type: Literal["file_change"] = "file_change"
    changes: list[FileChange] = Field(default_factory=list)
    """Every file the call changed; all applied or none."""


class SearchItem(ToolCallFields):
    type: Literal["search"] = "search"
    query: str = ""
    """Pattern or question searched for."""

    method: Literal["grep", "glob", "symbols", "semantic", "lexical"] = "grep"
    """What answered: ripgrep, a file pattern, the symbol index, embeddings, or the lexical
    fallback used when no embedding model is available."""

    match_count: int | None = None
    """Matches found (before capping)."""

    file_count: int | None = None
    """Files with at least one match."""

    truncated: bool = False
    """More results existed than were returned."""


class FileReadItem(ToolCallFields):
    type: Literal["file_read"] = "file_read"
    path: str = ""
    """Path relative to the workspace root."""

    range: LineRange | None = None
    """Lines returned; None for the whole file."""

    total_lines: int | None = None
    """Number of lines in the file."""

    encoding: str | None = None
    """Detected encoding, e.g. `utf-8`, `latin-1`; None for binary files."""


class TodoStatus(StrEnum):
    """Progress of one entry of the to-do list."""

    pending = "pending"
    in_progress = "in_progress"
    completed = "completed"


class TodoEntry(ProtocolModel):
    content: str
    """What is to be done, in a short imperative sentence."""

    status: TodoStatus = TodoStatus.pending
    """Progress of the entry."""


class TodoListItem(ToolCallFields):
    type: Literal["todo_list"] = "todo_list"
    todos: list[TodoEntry] = Field(default_factory=list)
    """The whole list after this call."""


class ContextSummaryItem(ItemFields):
    """A self-summarization step: the context was rebuilt around this summary."""

    type: Literal["context_summary"] = "context_summary"
    text: str = ""
    """The summary the model wrote (or the truncation notice of the fallback)."""

    state: str = ""
    """The conversation state kept beside the summary: the to-do list, the files touched and
    the number of summaries so far."""

    method: Literal["model", "truncation"] = "model"
    """`model`: the model summarized itself; `truncation`: its summary failed and older
    context was dropped deterministically, keeping the task and the state block."""

    tokens_before: int | None = None
    """Context size, in tokens, when summarization began."""

    tokens_after: int | None = None
    """Context size, in tokens, of the rebuilt context."""

    summary_index: int = 1
    """How many summaries this thread has had, this one included."""


class ApprovalDecision(StrEnum):
    """A client's answer to an approval request, and its effect on the turn.

    - `approve`: Run this call once; the turn continues.
    - `approve_for_thread`: Run this call, and later calls of the same tool and action class in
      this thread without asking again.
    - `deny`: Do not run the call; the model is told (with the client's message) and the turn
      continues.
    - `abort`: Do not run the call and interrupt the turn.
    """

    approve = "approve"
    approve_for_thread = "approve_for_thread"
    deny = "deny"
    abort = "abort"


class ApprovalRequestItem(ItemFields):
    """The runtime asks the client whether a tool call may run."""

    type: Literal["approval_request"] = "approval_request"
    target_item_id: str
    """The tool-call item waiting for this decision."""

    tool: str
    """Name of the tool whose call waits for the decision."""

    action_class: ActionClass
    """The call's risk class, which selected the policy rule."""

    summary: str
    """What would happen, for a human: the command line, or the files to change."""

    reason: str
    """Why approval is needed: the policy rule that asked."""

    decision: ApprovalDecision | None = None
    """The answer, once given."""

    decided_by: Literal["client", "policy", "no_client"] | None = None
    """Who decided: a client; a rule remembered for the thread; or nobody could be asked,
    which always means deny."""

    message: str | None = None
    """The client's note for the model, sent with a denial."""


class ErrorItem(ItemFields):
    type: Literal["error"] = "error"
    error: ErrorInfo
    """What failed and how to recover."""


Item = Annotated[
    UserMessageItem
    | AgentMessageItem
    | ReasoningItem
    | ToolCallItem
    | CommandExecutionItem
    | FileChangeItem
    | SearchItem
    | FileReadItem
    | TodoListItem
    | ContextSummaryItem
    | ApprovalRequestItem
    | ErrorItem,
    Field(discriminator="type"),
]

# --------------------------------------------------------------------------- deltas


class TextDelta(ProtocolModel):
    """More text for an `agent_message`, `reasoning` or `context_summary` item."""

    kind: Literal["text"] = "text"
    text: str
    """Text to append."""


class OutputDelta(ProtocolModel):
    """Output from a running command."""

    kind: Literal["output"] = "output"
    stream: Literal["stdout", "stderr"] = "stdout"
    """Which output stream the text came from."""

    text: str
    """Output to append (decoded as UTF-8, invalid bytes replaced)."""


ItemDelta = Annotated[TextDelta | OutputDelta, Field(discriminator="kind")]
