"""Typed tool failures. They never escape the harness as crashes: each becomes the call's
result, telling the model what went wrong and how to recover."""

from typing import ClassVar

from opencomposer.agent.protocol.common import ErrorInfo
from opencomposer.data_folder import DataFolderFull


class ToolError(Exception):
    kind: ClassVar[str] = "tool_error"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        """How the model can recover, e.g. 're-read the file and retry with its exact lines'."""

    def for_model(self) -> str:
        text = f"Error ({self.kind}): {self.message}"
        return f"{text}\n{self.hint}" if self.hint else text

    def info(self) -> ErrorInfo:
        return ErrorInfo(kind=self.kind, message=self.for_model(), retryable=self.retryable)


class InvalidArguments(ToolError):
    """The call's arguments do not fit the tool's schema or make no sense together."""

    kind = "invalid_arguments"


class NotFound(ToolError):
    """A path, job or symbol that does not exist."""

    kind = "not_found"


class Conflict(ToolError):
    """The workspace is not in the state the call assumed (text to replace not found or not
    unique, file exists, file changed on disk)."""

    kind = "conflict"


class Timeout(ToolError):
    kind = "timeout"
    retryable = True


class Denied(ToolError):
    """Refused by policy: a path outside the workspace, a denied approval, a rule."""

    kind = "denied"


class UnexpectedEnvironment(ToolError):
    """Something outside the call is broken: a missing program, a sandbox that cannot start,
    a file that cannot be decoded."""

    kind = "unexpected_environment"


class UserAborted(ToolError):
    """The user interrupted the turn while the call ran."""

    kind = "user_aborted"


class NotRecorded(ToolError):
    """The data folder had no room for the call's record (its checkpoint): nothing was
    changed, and the turn ends, since nothing the model does can make room."""

    kind = DataFolderFull.kind
