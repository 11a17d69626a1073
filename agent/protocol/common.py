"""Building blocks shared by every protocol payload.

Wire conventions (one set for HTTP/SSE and LSP alike): snake_case field names, as in the
OpenAI API our HTTP surface also speaks; ids are opaque strings; times are ISO 8601 in UTC;
unions are tagged by a `type` (items, events, inputs) or `kind` (deltas) field.
"""

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

PROTOCOL_VERSION = 1
"""Bumped on any change that an existing client could misread."""


class ProtocolModel(BaseModel):
    """Base of every payload: unknown fields are rejected so typos fail loudly."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        populate_by_name=True,
    )


def utc_now() -> datetime:
    return datetime.now(UTC)


class LineRange(ProtocolModel):
    """An inclusive range of 1-based line numbers."""

    start: int = Field(ge=1)
    """First line, 1-based."""

    end: int = Field(ge=1)
    """Last line, 1-based and inclusive."""


class ErrorInfo(ProtocolModel):
    """A failure as clients and the model see it."""

    kind: str
    """Machine-readable class, e.g. `engine_unavailable`, `context_overflow`, `timeout`."""

    message: str
    """What went wrong and, where possible, how to recover."""

    retryable: bool = False
    """Whether repeating the same request may succeed."""


class TokenUsage(ProtocolModel):
    """Tokens spent, summed over every model call of a turn."""

    prompt_tokens: int = 0
    """Prompt tokens sent to the engine, including cached ones."""

    completion_tokens: int = 0
    """Tokens the engine generated."""

    cached_prompt_tokens: int = 0
    """Prompt tokens served from the engine's prefix cache."""

    model_calls: int = 0
    """Number of engine requests made, whether or not they finished."""

    estimated: bool = False
    """Some of the tokens are estimated from text length: a call that was cut short
    (interrupted, failed mid-stream) before the engine reported what it used."""


class ActionClass(StrEnum):
    """How risky a tool call is; approval policies are written per class.

    - `read_only`: Reads the workspace or searches it; changes nothing.
    - `writes_workspace`: Changes files inside the workspace (edits, formatters, builds).
    - `dangerous`: May destroy data or act outside the workspace (rm -rf, git push --force,
      sudo).
    - `network`: Reaches the network (package installs, curl, git fetch).
    """

    read_only = "read_only"
    writes_workspace = "writes_workspace"
    dangerous = "dangerous"
    network = "network"


class ApprovalMode(StrEnum):
    """What the runtime does with a tool call of a given class or tool.

    - `auto`: Run without asking.
    - `ask`: Ask the client first; with no client able to answer, the call is denied.
    - `deny`: Never run; the model is told the call was refused by policy.
    """

    auto = "auto"
    ask = "ask"
    deny = "deny"


class ApprovalPolicy(ProtocolModel):
    """Which tool calls run on their own, which are asked about, which are refused."""

    read_only: ApprovalMode = ApprovalMode.auto
    """Mode for read-only calls."""

    writes_workspace: ApprovalMode = ApprovalMode.auto
    """Mode for calls that change files inside the workspace."""

    dangerous: ApprovalMode = ApprovalMode.ask
    """Mode for calls that may destroy data or act outside the workspace."""

    network: ApprovalMode = ApprovalMode.ask
    """Mode for calls that reach the network."""

    tools: dict[str, ApprovalMode] = Field(default_factory=dict)
    """Per-tool modes by tool name; they take precedence over the class modes."""

    commands: dict[str, ApprovalMode] = Field(default_factory=dict)
    """Modes for shell commands by their leading words, e.g. `{"pytest": "auto", "git push":
    "deny"}`. A deny rule matching any command of a command line refuses it; otherwise rules
    decide only when they match every command in it, and the class mode applies to the
    rest."""
