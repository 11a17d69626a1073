"""`opencomposer traces list|show|export|consent|completions`: the recorded threads, their
export as training data, per-workspace training consent, and the inline completions offered.

The store is `<home>/traces.db`. Only `consent` creates it: reading commands report that
there are no traces yet instead of leaving an empty database behind.
"""

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypedDict

import typer
from rich.markup import escape
from rich.table import Table

from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.options import (
    FLAG,
    ConfigOverrides,
    Json,
    Workspace,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err, out, print_json

if TYPE_CHECKING:  # the store (numpy, pydantic models) loads only when a command runs
    from opencomposer.agent.protocol.threads import TurnWithItems
    from opencomposer.agent.traces.base import TraceStore

traces_app = CommandApp(
    help="Traces: recorded threads, their export for training, consent.", no_args_is_help=True
)


class Format(StrEnum):
    jsonl = "jsonl"
    parquet = "parquet"


ThreadId = Annotated[str, typer.Argument(help="Thread id, as listed by `traces list`.")]


class ThreadRow(TypedDict):
    """One thread of `traces list`, as its JSON output has it."""

    id: str
    updated: str
    title: str | None
    workspace: str
    turns: int


class CompletionRow(TypedDict):
    """One completion of `traces completions`, as its JSON output has it."""

    id: str
    at: str
    path: str
    model: str | None
    text: str
    duration_ms: int
    events: list[str]


@traces_app.command("list")
def list_traces(
    workspace: Workspace = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Most threads to list.")] = 20,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """Recorded threads, most recently updated first."""
    with _opened(workspace, config) as store:
        if store is None:
            if json:
                print_json([])
            else:
                out.print("no traces yet")
            return
        threads, _ = store.list_threads(
            limit=limit, workspace=None if workspace is None else str(workspace)
        )
        rows: list[ThreadRow] = [
            {
                "id": t.id,
                "updated": t.updated_at.isoformat(),
                "title": t.title,
                "workspace": t.workspace,
                "turns": len(store.turns(t.id)),
            }
            for t in threads
        ]
    if json:
        print_json(rows)
        return
    if not rows:
        out.print("no threads" + ("" if workspace is None else f" in {escape(str(workspace))}"))
        return
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("id", "updated", "title", "workspace", "turns"):
        table.add_column(column, overflow="fold", justify="right" if column == "turns" else "left")
    for row in rows:
        updated = datetime.fromisoformat(row["updated"]).astimezone().strftime("%Y-%m-%d %H:%M")
        table.add_row(
            row["id"],
            updated,
            escape(row["title"] or ""),
            escape(row["workspace"]),
            str(row["turns"]),
        )
    out.print(table)


@traces_app.command("completions")
def completions(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="Most completions to list.")
    ] = 20,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """Inline completions offered in editors, newest first, with what became of each
    (shown, accepted, partially accepted, rejected) and the acceptance rate."""
    with _opened(None, config) as store:
        records = [] if store is None else store.completions(limit)
    rows: list[CompletionRow] = [
        {
            "id": r.id,
            "at": r.at.isoformat(),
            "path": r.path,
            "model": r.model,
            "text": r.text,
            "duration_ms": r.duration_ms,
            "events": [e.kind for e in r.events],
        }
        for r in records
    ]
    if json:
        print_json(rows)
        return
    if not rows:
        out.print("no completions yet")
        return
    shown = [r for r in rows if r["events"]]  # the editor said what became of these
    taken = [r for r in shown if {"accepted", "partially_accepted"} & set(r["events"])]
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("at", "path", "text", "ms", "outcome"):
        table.add_column(column, overflow="fold", justify="right" if column == "ms" else "left")
    for row in rows:
        at = datetime.fromisoformat(row["at"]).astimezone().strftime("%Y-%m-%d %H:%M:%S")
        first_line = row["text"].splitlines()[0] if row["text"] else ""
        table.add_row(
            at,
            escape(row["path"]),
            escape(first_line[:60]),
            str(row["duration_ms"]),
            ", ".join(row["events"]) or "-",
        )
    out.print(table)
    if shown:
        out.print(
            f"accepted {len(taken)} of {len(shown)} with an outcome ({len(taken) / len(shown):.0%})"
        )


@traces_app.command("show")
def show(thread_id: ThreadId, config: ConfigOverrides = None, json: Json = False) -> None:
    """One thread's turns and items; with --json, its export record."""
    from opencomposer.agent.traces.export import thread_record

    with _opened(None, config) as store:
        thread = None if store is None else store.thread(thread_id)
        if store is None or thread is None:
            _fail(f"unknown thread {thread_id}", 2)
        if json:
            print_json(thread_record(store, thread_id))
            return
        turns = store.turns(thread_id)
    out.print(f"[bold]{escape(thread.title or '(untitled)')}[/]  {thread.id}")
    out.print(
        f"[dim]{escape(thread.workspace)} · model {thread.model or '-'} · "
        f"started {thread.created_at.astimezone():%Y-%m-%d %H:%M}[/]"
    )
    for number, turn in enumerate(turns, 1):
        _print_turn(number, turn)


@traces_app.command("export")
def export(
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="File (jsonl) or folder (parquet) to write; jsonl goes to stdout without it.",
        ),
    ] = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.jsonl,
    thread: Annotated[
        list[str] | None,
        typer.Option("--thread", "-t", help="Export only this thread. Repeatable."),
    ] = None,
    workspace: Workspace = None,
    for_training: Annotated[
        bool,
        typer.Option(
            "--for-training",
            help="Only threads of workspaces that consented to training.",
            metavar=FLAG,
        ),
    ] = False,
    config: ConfigOverrides = None,
) -> None:
    """Write threads as training data: the item log and the token layer of each."""
    from opencomposer.agent.traces.export import ExportError, iter_threads, write_parquet

    if format is Format.parquet and out_path is None:
        raise typer.BadParameter(
            "parquet is written to a folder: give --out DIR", param_hint="--out"
        )
    with _opened(workspace, config) as store:
        for thread_id in thread or []:
            if store is None or store.thread(thread_id) is None:
                _fail(f"unknown thread {thread_id}", 2)
        records: Iterator[dict[str, Any]] = (
            iter(())
            if store is None
            else iter_threads(
                store,
                thread_ids=thread,
                for_training=for_training,
                workspace=None if workspace is None else str(workspace),
            )
        )
        try:
            if out_path is None:
                _write_stdout(records)
                return
            if format is Format.parquet:
                count = write_parquet(records, out_path)
            else:
                count = _write_file(records, out_path)
        except ExportError as exc:
            _fail(str(exc), 1)
    err.print(
        f"wrote {count} thread{'' if count == 1 else 's'} to {escape(str(out_path))}",
        soft_wrap=True,
    )


@traces_app.command("consent")
def consent(
    workspace: Annotated[
        Path,
        typer.Option(
            "--workspace",
            "-w",
            help="Workspace folder.",
            exists=True,
            file_okay=False,
            resolve_path=True,
        ),
    ],
    allow: Annotated[
        bool,
        typer.Option(
            "--allow", help="Allow this workspace's traces to be used for training.", metavar=FLAG
        ),
    ] = False,
    revoke: Annotated[
        bool, typer.Option("--revoke", help="Take that permission back.", metavar=FLAG)
    ] = False,
    config: ConfigOverrides = None,
) -> None:
    """Show or set whether a workspace's traces may be used for training (default: no)."""
    if allow and revoke:
        raise typer.BadParameter("give --allow or --revoke, not both", param_hint="--allow")
    with _opened(workspace, config, create=allow or revoke) as store:
        if store is not None and (allow or revoke):
            store.set_consent(str(workspace), allow)
        allowed = store is not None and store.consent(str(workspace))
    out.print(
        f"training consent for {escape(str(workspace))}: "
        f"{'[green]allowed[/]' if allowed else 'not allowed'}"
    )


@contextmanager
def _opened(
    workspace: Path | None, config: list[str] | None, *, create: bool = False
) -> Iterator["TraceStore | None"]:
    """The trace store, or None when it does not exist and `create` is false."""
    from opencomposer.agent.traces.base import TraceStoreError
    from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore

    path = settings_for(workspace, overrides_from(config)).settings.home / "traces.db"
    if not create and not path.exists():
        yield None
        return
    try:
        store = SQLiteTraceStore(path)
    except TraceStoreError as exc:
        _fail(str(exc), 1)
    try:
        yield store
    finally:
        store.close()


def _write_stdout(records: Iterator[dict[str, Any]]) -> None:
    from opencomposer.agent.traces.export import write_jsonl

    try:
        write_jsonl(records, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(141) from None


def _write_file(records: Iterator[dict[str, Any]], path: Path) -> int:
    """JSONL into a file that appears by rename, so a failure leaves no half-written file."""
    from opencomposer.agent.traces.export import write_jsonl

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    try:
        with partial.open("w", encoding="utf-8") as file:
            count = write_jsonl(records, file)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def _fail(message: str, code: int) -> NoReturn:
    err.print(f"opencomposer: {message}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


_MARK = {
    "completed": "[green]✓[/]",
    "failed": "[red]✗[/]",
    "declined": "[yellow]declined[/]",
    "interrupted": "[yellow]interrupted[/]",
    "in_progress": "[dim]…[/]",
}


def _print_turn(number: int, turn: "TurnWithItems") -> None:
    stop = f" ({turn.stop_reason})" if turn.stop_reason else ""
    usage = turn.usage
    out.print(
        f"\n[bold]turn {number}[/] · {turn.status}{stop} · {usage.model_calls} calls, "
        f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens"
    )
    if turn.error:
        out.print(f"  [red]error ({turn.error.kind})[/]: {escape(turn.error.message)}")
    for item in turn.items:
        out.print(_describe(item))


def _describe(item: Any) -> str:
    """One item as a line (or a few) of rich markup."""
    kind = item.type
    if kind == "user_message":
        parts = [
            c.text
            if c.type == "text"
            else f"@{c.path}" + (f":{c.range.start}-{c.range.end}" if c.range else "")
            for c in item.content
        ]
        return f"[bold cyan]user[/]  {escape(' '.join(parts))}"
    if kind == "agent_message":
        return f"[bold magenta]agent[/] {escape(item.text)}"
    if kind == "reasoning":
        text = " ".join(item.text.split())
        return f"[dim]thinking: {escape(text[:200] + ('…' if len(text) > 200 else ''))}[/]"
    if kind == "context_summary":
        sizes = (
            f", {item.tokens_before} → {item.tokens_after} tokens"
            if item.tokens_before is not None
            else ""
        )
        return (
            f"[bold yellow]summary #{item.summary_index}[/] ({item.method}{sizes}) "
            f"{escape(item.text)}"
        )
    if kind == "approval_request":
        decision = item.decision or "waiting"
        return f"[yellow]approval[/] {escape(item.summary)} → {decision}"
    if kind == "error":
        return f"[red]error ({item.error.kind})[/]: {escape(item.error.message)}"
    # Every other item is a tool call.
    mark = _MARK.get(item.status, item.status)
    match kind:
        case "command_execution":
            target = f"$ {item.command}"
        case "file_change":
            target = ", ".join(f"{c.kind} {c.path}" for c in item.changes)
        case "file_read":
            target = item.path
        case "search":
            target = f"{item.method} {item.query!r}"
        case "todo_list":
            target = f"{len(item.todos)} todos"
        case _:
            target = item.arguments_text
    line = f"  {mark} [bold]{item.tool}[/] {escape(target)}"
    if kind == "command_execution" and item.exit_code is not None:
        line += f" [dim](exit {item.exit_code})[/]"
    if item.error:
        line += f"\n      [red]{item.error.kind}[/]: {escape(item.error.message)}"
    return line
