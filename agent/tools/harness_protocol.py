"""What the agent runtime needs of a tool harness, and the values that cross between them.

The runtime drives a turn through `Harness` alone, so the tools can run in this process
(`harness.ToolHarness`) or in another one, inside a sandbox (`rpc.RemoteHarness`): every
operation is expressed at the level the runtime uses it (prepare a call for approval, run
it, undo, what became of a turn's edits, the git summary for the prompt), and every value
that crosses is plain data that survives JSON.

Secrets stay on the runtime's side: the thread's `Redactor` belongs to the runtime, which
masks everything the model, the logs and the traces see with it. A harness keeps that
redactor knowing what the tools' side finds secret (the values of the workspace's `.env`
files, credentials dropped from the commands' environment): the local harness writes them
into it directly; the remote one receives them with every answer over its private pipe and
adds them before the answer is used (see `rpc`).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from opencomposer.agent.protocol.common import ActionClass, ErrorInfo
from opencomposer.agent.protocol.items import FileChange
from opencomposer.agent.tools.base import View
from opencomposer.agent.tools.checkpoints import UndoScope
from opencomposer.agent.tools.errors import ToolError, UnexpectedEnvironment
from opencomposer.agent.tools.terminal.jobs import OnOutput
from opencomposer.config import ToolSettings
from opencomposer.redact import Redactor
from opencomposer.serving.engines.base import ToolSpec


class HarnessUnavailable(UnexpectedEnvironment):
    """The harness itself is gone or broken (its process died, answered nonsense or stopped
    answering): no call of the thread can run any more, so the turn fails with this instead
    of the model reading it as one call's failure and trying again."""


@dataclass
class CallOutcome:
    call_id: str
    tool: str
    ok: bool
    text: str
    """What the model reads: the result, or the error and how to recover."""

    view: View = "tool_call"
    """The protocol item view of the tool (`tool_call` for an unknown tool)."""

    fields: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    error: ErrorInfo | None = None
    action_class: ActionClass | None = None
    duration_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "ok": self.ok,
            "text": self.text,
            "view": self.view,
            "fields": jsonable(self.fields),
            "data": jsonable(self.data),
            "error": self.error.model_dump() if self.error else None,
            "action_class": self.action_class,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CallOutcome":
        error, action_class = data.get("error"), data.get("action_class")
        return cls(
            **{
                **data,
                "error": ErrorInfo.model_validate(error) if error else None,
                "action_class": ActionClass(action_class) if action_class else None,
            }
        )


@dataclass(frozen=True)
class PreparedCall:
    """A validated call, classified before it runs so the runtime can ask for approval: what
    the approval gate, the approval request and the call's item need, and the `id` the
    harness runs it by (its validated arguments stay with the harness)."""

    id: str
    tool: str
    view: View
    action_class: ActionClass
    summary: str
    """One line for a human deciding an approval."""

    commands: list[list[str]]
    """The argv of every program the call would run (for command approval rules)."""

    view_fields: dict[str, Any]
    """Fields of the item view the arguments determine (the command, the path)."""

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "view_fields": jsonable(self.view_fields)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PreparedCall":
        return cls(**{**data, "action_class": ActionClass(data["action_class"])})


@dataclass
class UndoOutcome:
    restored: list[FileChange]
    conflicts: list[str]
    """Files changed by someone else since the agent wrote them; left untouched."""

    unrestorable: list[str] = field(default_factory=list)
    """Files the undone edits changed whose contents checkpoints do not keep (secret files,
    files over `tools.checkpoint_max_bytes`), so undo cannot put them back."""

    def to_json(self) -> dict[str, Any]:
        return {
            "restored": [change.model_dump(mode="json") for change in self.restored],
            "conflicts": self.conflicts,
            "unrestorable": self.unrestorable,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "UndoOutcome":
        return cls(
            restored=[FileChange.model_validate(change) for change in data["restored"]],
            conflicts=data["conflicts"],
            unrestorable=data["unrestorable"],
        )


@dataclass(frozen=True)
class EditState:
    """What became of one file a turn changed, compared with the turn's checkpoints."""

    path: str
    """Relative to the workspace."""

    state: Literal["kept", "reverted", "modified"]
    """As the agent wrote it, back to what it was before, or changed since."""


class SecretWatch(Protocol):
    """Keeps the thread's redactor knowing what secret files hold (`SecretFiles` locally)."""

    def refresh(self, *, force: bool = False) -> None:
        """Learn what changed since the last refresh; cheap enough to call on every event."""
        ...

    def note_call(self, arguments: Any) -> None:
        """Learn the values a call is about to write into a secret file: its arguments go
        out in events before the file exists."""
        ...


class Harness(Protocol):
    """One thread's tools, as the runtime drives them."""

    @property
    def root(self) -> Path:
        """The workspace's root, as the tools see it."""
        ...

    @property
    def settings(self) -> ToolSettings: ...

    @property
    def redactor(self) -> Redactor:
        """The thread's redactor, which the harness keeps knowing the tools' secrets."""
        ...

    @property
    def secret_files(self) -> SecretWatch: ...

    def specs(self) -> list[ToolSpec]: ...

    async def prepare(self, name: str, arguments: dict[str, Any] | str | None) -> PreparedCall:
        """Validate and classify a call; raises ToolError (HarnessUnavailable when the
        harness is gone)."""
        ...

    async def run(
        self,
        prepared: PreparedCall,
        *,
        call_id: str,
        turn_id: str | None = None,
        on_output: OnOutput | None = None,
    ) -> CallOutcome:
        """Run a prepared call (once); every failure of the call is an outcome, only
        HarnessUnavailable is raised. `on_output(stream, text)` receives a command's output
        live."""
        ...

    def failure(
        self,
        call_id: str,
        name: str,
        error: ToolError,
        prepared: PreparedCall | None = None,
        duration_ms: int = 0,
    ) -> CallOutcome:
        """The outcome of a call that failed (or was refused) with `error`."""
        ...

    async def undo(self, scope: UndoScope = "edit", turn_id: str | None = None) -> UndoOutcome:
        """Put back the files of the last edit, a turn, or the whole thread; raises Conflict
        when every file changed since."""
        ...

    async def edit_states(self, turn_id: str) -> list[EditState]:
        """What became of each file the turn changed."""
        ...

    async def git_summary(self) -> str | None:
        """The workspace's git status for a new turn's prompt; None outside a repository."""
        ...

    async def refresh_secrets(self) -> None:
        """Bring the redactor up to date with every secret file now, before a turn's request
        goes out (the user may have written one since the last turn)."""
        ...

    async def close(self) -> None:
        """Stop background work and release files (idempotent)."""
        ...


def jsonable(value: Any) -> Any:
    """Protocol models and paths inside fields become plain JSON."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
