"""Threads and turns: a conversation bound to a workspace, and one request within it."""

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from opencomposer.agent.protocol.common import (
    ApprovalPolicy,
    ErrorInfo,
    ProtocolModel,
    TokenUsage,
    utc_now,
)
from opencomposer.agent.protocol.items import Item


class TurnLimits(ProtocolModel):
    """What a turn may spend. Unset is the server's limit; a value above the server's is
    lowered to it (limits only tighten), so a client or a trainer can shorten turns, never
    lengthen them."""

    max_steps: int | None = Field(default=None, ge=1)
    """Model calls (summaries not counted)."""

    max_tokens: int | None = Field(default=None, ge=1)
    """Prompt tokens not served from the engine's cache, plus generated tokens."""

    max_wall_time: float | None = Field(default=None, gt=0)
    """Seconds, from the turn's start to its end."""


class Thread(ProtocolModel):
    id: str
    """Unique thread id."""

    workspace: str
    """Absolute path of the workspace root every tool call is confined to."""

    title: str | None = None
    """Short human title, from the first request unless the client sets one."""

    model: str | None = None
    """Model id the thread's turns are served by."""

    approval_policy: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    """Which tool calls run on their own, are asked about, or are refused: the client's
    request made no looser than the server's policy, which is also applied to every call
    as it stands when the call is made."""

    limits: TurnLimits = Field(default_factory=TurnLimits)
    """Limits every turn of the thread runs under (within the server's)."""

    tools: list[str] | None = None
    """The tools the thread's turns may call, by name; every tool when None."""

    created_at: datetime = Field(default_factory=utc_now)
    """When the thread was created."""

    updated_at: datetime = Field(default_factory=utc_now)
    """When the thread last changed (a turn started or ended)."""


class TurnStatus(StrEnum):
    """How a turn ended (or that it still runs).

    - `in_progress`: The turn is running.
    - `completed`: The model answered without further tool calls, or a budget ended the turn
      cleanly (see `stop_reason`).
    - `interrupted`: A client interrupted the turn, or an approval answer aborted it.
    - `failed`: An error the turn could not recover from (see `error`).
    """

    in_progress = "in_progress"
    completed = "completed"
    interrupted = "interrupted"
    failed = "failed"


class StopReason(StrEnum):
    """Why a turn stopped.

    - `answered`: The model gave a final answer.
    - `max_steps`: The step budget (model calls) ran out.
    - `max_step_tokens`: The model's last step was cut at the step's token cap
      (`agent.max_step_tokens`, by default a quarter of the model's window) before it
      finished its answer.
    - `max_tokens`: The token budget ran out.
    - `max_wall_time`: The wall-time budget ran out.
    - `repetition`: The same failing call kept repeating, so the loop was stopped.
    - `repeated_text`: The model's output was one piece of text over and over
      (`agent.repeated_text_chars`), so its step was cut and the turn stopped.
    - `interrupted`: A client interrupted the turn.
    - `error`: An unrecoverable error ended it.
    """

    answered = "answered"
    max_steps = "max_steps"
    max_step_tokens = "max_step_tokens"
    max_tokens = "max_tokens"
    max_wall_time = "max_wall_time"
    repetition = "repetition"
    repeated_text = "repeated_text"
    interrupted = "interrupted"
    error = "error"


class Turn(ProtocolModel):
    id: str
    """Unique turn id."""

    thread_id: str
    """The thread this turn belongs to."""

    status: TurnStatus = TurnStatus.in_progress
    """Whether the turn runs or how it ended."""

    stop_reason: StopReason | None = None
    """Why the turn ended; None while it runs."""

    usage: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens spent by the turn so far."""

    error: ErrorInfo | None = None
    """Why the turn failed, when `status` is `failed`."""

    started_at: datetime = Field(default_factory=utc_now)
    """When the turn started."""

    completed_at: datetime | None = None
    """When the turn ended; None while it runs."""


class TurnWithItems(Turn):
    items: list[Item] = Field(default_factory=list)
    """The turn's items in log order, each in its latest (completed, if finished) state."""
