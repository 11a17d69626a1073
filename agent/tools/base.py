"""What a tool is: a name, a short description, a pydantic argument model (the JSON schema
the model sees is generated from it), a risk classification, and an async `run`.

Each tool names the protocol item view clients render its calls with (`file_read`, `search`,
`command_execution`, ...), fixed per tool so a client knows what it is showing from the moment
the call starts; `view_fields` fills what the arguments already say (the command, the path).
A run returns `ToolResult`: `text` is what the model reads (terse, capped); `fields` complete
the item (match counts, the diff, the exit code); `data` carries anything else a client or
test wants in structured form. Failures are raised as `ToolError`s and turned into results by
the harness.
"""

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from opencomposer.agent.protocol.common import ActionClass
from opencomposer.agent.protocol.items import FileChange, TodoEntry
from opencomposer.agent.tools.changes import FileOp
from opencomposer.agent.tools.indexes import CodeIndexes
from opencomposer.agent.tools.sandbox import Sandbox
from opencomposer.agent.tools.terminal.jobs import JobManager, OnOutput
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings
from opencomposer.serving.engines.base import ToolSpec

View = Literal["tool_call", "command_execution", "file_change", "search", "file_read", "todo_list"]


class ToolArgs(BaseModel):
    """Base of argument models: field docstrings become the descriptions the model reads,
    unknown arguments are errors (a misspelt argument must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


ArgsT = TypeVar("ArgsT", bound=ToolArgs)
"""A tool's argument model: what its `run` and the classifying methods receive."""


@dataclass
class ToolResult:
    text: str
    fields: dict[str, Any] = field(default_factory=dict)
    """Fields of the tool's protocol item view (e.g. `total_lines`, `range` for `file_read`)."""

    data: dict[str, Any] = field(default_factory=dict)


class ToolServices(Protocol):
    """What a tool may use of the harness that runs it (`ToolHarness` is the one): the
    workspace, the command jobs and their sandbox, the code indexes, the to-do list, and
    `apply`, the one way file changes are written (checkpointed for undo)."""

    settings: ToolSettings
    todos: list[TodoEntry]

    @property
    def workspace(self) -> Workspace: ...

    @property
    def indexes(self) -> CodeIndexes: ...

    @property
    def jobs(self) -> JobManager: ...

    @property
    def sandbox(self) -> Sandbox: ...

    async def apply(self, ops: Sequence[FileOp], ctx: "ToolContext") -> list[FileChange]: ...


@dataclass
class ToolContext:
    harness: ToolServices
    call_id: str
    turn_id: str | None = None
    """Groups the call's file changes into a turn for undo."""

    on_output: OnOutput | None = None
    """Receives a command's output as it arrives, for clients to watch it live."""


class Tool(ABC, Generic[ArgsT]):
    """A tool taking arguments of model `ArgsT`. The harness validates a call with `Args`
    before anything else sees it, so the methods receive that model, never a bare ToolArgs.
    A collection of different tools is a `Sequence[Tool[Any]]`: which model goes with
    which tool is only known per tool, through its own `Args`."""

    name: ClassVar[str]
    description: ClassVar[str]
    Args: type[ArgsT]
    """The argument model (set on the class; a ClassVar cannot name a type variable)."""

    view: ClassVar[View] = "tool_call"

    def view_fields(self, args: ArgsT) -> dict[str, Any]:
        """Fields of the view that the arguments determine, known before the call runs."""
        return {}

    def action_class(self, args: ArgsT) -> ActionClass:
        """Risk of this call; read-only unless a tool says otherwise."""
        return ActionClass.read_only

    def commands(self, args: ArgsT) -> list[list[str]]:
        """The argv of every program the call would run, for command approval rules."""
        return []

    def summary(self, args: ArgsT) -> str:
        """One line for a human deciding an approval: what the call would do."""
        shown = json.dumps(args.model_dump(exclude_defaults=True), ensure_ascii=False)
        return f"{self.name} {shown if len(shown) <= 200 else shown[:199] + '…'}"

    @abstractmethod
    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolResult: ...

    def spec(self) -> ToolSpec:
        schema = self.Args.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)
