"""Showing a turn's events in a terminal: the answer streamed as it is written, one line per
tool call as it starts and its outcome when it ends (a command's last lines, a change's diff),
thinking dimmed, and a closing line with why the turn ended and what it cost."""

from rich.console import Console
from rich.markup import escape

from opencomposer.agent.protocol.events import Event
from opencomposer.agent.protocol.items import (
    CommandExecutionItem,
    ContextSummaryItem,
    ErrorItem,
    FileChangeItem,
    Item,
    ItemStatus,
    ReasoningItem,
    SearchItem,
    TodoListItem,
    ToolCallFields,
)
from opencomposer.agent.protocol.threads import Turn
from opencomposer.agent.tool_items import describe_call

OUTPUT_TAIL = 8
DIFF_LINES = 40
_MARK = {
    ItemStatus.completed: "[green]✓[/]",
    ItemStatus.failed: "[red]✗[/]",
    ItemStatus.declined: "[yellow]⊘[/]",
    ItemStatus.interrupted: "[yellow]■[/]",
}


class TurnPrinter:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming: str | None = None  # the item whose text is being written
        self._reasoning: set[str] = set()

    def _print(self, *objects: object, **options: object) -> None:
        # Soft wrap: long lines stay whole in pipes and logs, the terminal wraps them itself.
        self.console.print(*objects, soft_wrap=True, **options)  # type: ignore[arg-type]

    def show(self, event: Event) -> None:
        if event.type == "item.started":
            self._started(event.item)
        elif event.type == "item.delta":
            self._delta(event.item_id, event.delta.kind, event.delta.text)
        elif event.type == "item.completed":
            self._completed(event.item)
        elif event.type == "turn.completed":
            self._end_stream()
            self._turn_completed(event.turn)

    def _started(self, item: Item) -> None:
        if isinstance(item, ReasoningItem):
            self._reasoning.add(item.id)
        elif isinstance(item, ToolCallFields):
            self._end_stream()
            self._print(f"[bold cyan]▶[/] {escape(describe_call(item))}")
        elif isinstance(item, ContextSummaryItem):
            self._end_stream()
            self._print("[magenta]↻ summarizing the conversation to free context…[/]")

    def _delta(self, item_id: str, kind: str, text: str) -> None:
        if kind != "text":
            return  # command output is shown, as a tail, when the command ends
        if self._streaming != item_id:
            self._end_stream()
            self._streaming = item_id
        style = "dim italic" if item_id in self._reasoning else None
        self._print(text, end="", style=style, markup=False, highlight=False)

    def _end_stream(self) -> None:
        if self._streaming is not None:
            self._print()
            self._streaming = None

    def _completed(self, item: Item) -> None:
        if item.id == self._streaming:
            self._end_stream()
        if isinstance(item, ToolCallFields):
            self._tool_done(item)
        elif isinstance(item, ContextSummaryItem):
            how = "summary" if item.method == "model" else "fallback truncation"
            self._print(
                f"[magenta]↻ context rebuilt from a {how} "
                f"({item.tokens_before} → {item.tokens_after} tokens)[/]"
            )
        elif isinstance(item, ErrorItem):
            self._print(f"[red]error ({item.error.kind}): {escape(item.error.message)}[/]")

    def _tool_done(self, item: ToolCallFields) -> None:
        mark = _MARK.get(item.status, " ")
        if item.status != ItemStatus.completed:
            reason = (item.error.message if item.error else item.output or "").splitlines()
            first = reason[0] if reason else item.status.value
            self._print(f"  {mark} [dim]{escape(first)}[/]")
            return
        if isinstance(item, CommandExecutionItem):
            lines = (item.output or "").rstrip().splitlines()
            for line in lines[-OUTPUT_TAIL:]:
                self._print(f"  [dim]{escape(line)}[/]")
        elif isinstance(item, FileChangeItem):
            for change in item.changes:
                diff = change.diff.splitlines()
                for line in diff[:DIFF_LINES]:
                    self._print(f"  {_diff_line(line)}")
                if len(diff) > DIFF_LINES:
                    self._print(f"  [dim]… {len(diff) - DIFF_LINES} more lines[/]")
        elif isinstance(item, SearchItem):
            files = f" in {item.file_count} files" if item.file_count is not None else ""
            self._print(f"  {mark} [dim]{item.match_count} matches{files}[/]")
        elif isinstance(item, TodoListItem):
            for todo in item.todos:
                box = {"completed": "x", "in_progress": "~"}.get(todo.status, " ")
                self._print(f"  [dim][{box}] {escape(todo.content)}[/]")

    def _turn_completed(self, turn: Turn) -> None:
        usage = turn.usage
        reason = turn.stop_reason.value if turn.stop_reason else turn.status.value
        style = {"completed": "green", "interrupted": "yellow", "failed": "red"}[turn.status]
        calls = f"{usage.model_calls} model call{'' if usage.model_calls == 1 else 's'}"
        about = "~" if usage.estimated else ""  # some tokens estimated: a call was cut short
        self._print(
            f"[{style}]── {turn.status.value} ({reason})[/] [dim]· {calls} · "
            f"{about}{usage.prompt_tokens:,} prompt + {about}{usage.completion_tokens:,} "
            "completion tokens[/]"
        )


def _diff_line(line: str) -> str:
    text = escape(line)
    if line.startswith("+") and not line.startswith("+++"):
        return f"[green]{text}[/]"
    if line.startswith("-") and not line.startswith("---"):
        return f"[red]{text}[/]"
    return f"[dim]{text}[/]"
