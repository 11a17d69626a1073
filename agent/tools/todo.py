"""todo_write: the agent's plan as a short list of tasks with their status.

The whole list is sent each time (simpler for models than patching entries); the harness
keeps it per thread and the runtime shows it to clients and keeps it across
self-summarization.
"""

from pydantic import Field

from opencomposer.agent.protocol.items import TodoEntry, TodoStatus
from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.errors import InvalidArguments

_MARK = {TodoStatus.pending: "[ ]", TodoStatus.in_progress: "[~]", TodoStatus.completed: "[x]"}


class TodoWriteArgs(ToolArgs):
    todos: list[TodoEntry] = Field(max_length=50)
    """The complete list: every task with its status (pending, in_progress, completed)."""


class TodoWrite(Tool[TodoWriteArgs]):
    name = "todo_write"
    description = (
        "Replace the task list that tracks your plan. Send the whole list each time; keep at "
        "most one task in_progress."
    )
    Args = TodoWriteArgs
    view = "todo_list"

    async def run(self, args: TodoWriteArgs, ctx: ToolContext) -> ToolResult:
        active = [t for t in args.todos if t.status == TodoStatus.in_progress]
        if len(active) > 1:
            raise InvalidArguments(
                f"{len(active)} tasks are in_progress",
                hint="Mark only the task you are working on as in_progress.",
            )
        ctx.harness.todos = list(args.todos)
        done = sum(t.status == TodoStatus.completed for t in args.todos)
        lines = [f"{_MARK[t.status]} {t.content}" for t in args.todos]
        text = "\n".join([f"Task list updated ({done}/{len(args.todos)} done):", *lines])
        return ToolResult(text=text, fields={"todos": ctx.harness.todos})
