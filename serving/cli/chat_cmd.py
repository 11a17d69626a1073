"""`opencomposer chat`: one agent turn in the terminal.

The turn streams as it runs (or as raw protocol events with `--json`), approvals are asked
at the terminal when a person is there to answer (otherwise they are denied, never silently
granted), Ctrl-C interrupts the turn cleanly (the model stream is closed, a running command is
killed, and what was done stays in the trace), and `--thread` continues an earlier thread.
Exit status: 0 when the turn completed, 1 when it failed, 130 when it was interrupted.
"""

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.prompt import Prompt

from opencomposer.config import Settings
from opencomposer.serving.cli.options import (
    Approval,
    ConfigOverrides,
    EngineSpec,
    Json,
    Workspace,
    approval_overrides,
    engine_overrides,
    given,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err, out
from opencomposer.terminal_text import for_terminal, json_for_terminal

_ANSWERS = {"y": "approve", "a": "approve_for_thread", "n": "deny", "s": "abort"}


def chat(
    request: Annotated[str, typer.Argument(help="What the agent should do.", metavar="REQUEST")],
    workspace: Workspace = None,
    engine: EngineSpec = None,
    model: Annotated[str | None, typer.Option(help="Model id (sets engine.model).")] = None,
    approval: Approval = None,
    thread: Annotated[
        str | None, typer.Option("--thread", help="Continue this thread instead of starting one.")
    ] = None,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """Run one agent turn in a workspace, streamed, with approvals at the terminal."""
    overrides = overrides_from(
        config,
        **engine_overrides(engine) | given({"engine.model": model}) | approval_overrides(approval),
    )
    root = workspace or Path.cwd()
    settings = settings_for(root, overrides).settings
    status = asyncio.run(_chat(settings, root, request, thread, json))
    raise typer.Exit(status)


async def _chat(
    settings: Settings, root: Path, request: str, thread_id: str | None, as_json: bool
) -> int:
    from opencomposer.agent.api import AgentAPI
    from opencomposer.agent.protocol.items import TextInput
    from opencomposer.agent.protocol.methods import TurnStartParams
    from opencomposer.agent.protocol.threads import TurnStatus
    from opencomposer.agent.runtime import AgentRuntime
    from opencomposer.agent.session import SessionError
    from opencomposer.serving.cli.chat_render import TurnPrinter
    from opencomposer.serving.engines import make_engine

    engine = make_engine(settings.engine, settings.models_dir)
    runtime = AgentRuntime(settings, engine)
    try:
        try:
            session = (
                await runtime.open_thread(thread_id)
                if thread_id
                else await runtime.start_thread(root)
            )
        except SessionError as exc:
            err.print(f"[red]opencomposer: {escape(exc.message)}[/]")
            return 2
        interactive = sys.stdin.isatty() and not as_json
        api = AgentAPI(runtime, lambda: [root])
        params = TurnStartParams(thread_id=session.thread.id, input=[TextInput(text=request)])
        try:
            events = await api.stream_turn(params, answers_approvals=interactive)
        except SessionError as exc:
            err.print(f"[red]opencomposer: {escape(exc.message)}[/]")
            return 2
        turn = events.turn
        if not as_json:
            err.print(f"[dim]thread {session.thread.id} · turn {turn.id} · {root}[/]")
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(
            signal.SIGINT, lambda: asyncio.ensure_future(session.interrupt(turn.id))
        )
        printer = TurnPrinter(out)
        try:
            async for event in events:
                if as_json:
                    print(json_for_terminal(event.model_dump_json()), flush=True)
                else:
                    printer.show(event)
                if event.type == "item.started" and event.item.type == "approval_request":
                    await _ask(session, event.item, interactive)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            events.close()
        ended = await session.wait(turn.id)
        return {TurnStatus.completed: 0, TurnStatus.failed: 1}.get(ended.status, 130)
    finally:
        await runtime.close()
        await engine.aclose()


async def _ask(session: Any, item: Any, interactive: bool) -> None:
    """Ask the person at the terminal; the turn waits for the answer."""
    from opencomposer.agent.protocol.items import ApprovalDecision
    from opencomposer.agent.session import SessionError

    if not interactive:
        return  # no approver subscribed: the runtime has already denied it
    # One line, every control character and line break visible: the person approves exactly
    # what will run, with nothing able to rewrite or scroll away part of it.
    summary = escape(for_terminal(item.summary, newlines=False))
    out.print(
        f"[yellow]? approve {escape(item.tool)}: {summary}[/] [dim]({escape(item.reason)})[/]",
        soft_wrap=True,
    )
    choice = await asyncio.to_thread(
        Prompt.ask,
        "  [y] yes  [a] yes for this thread  [n] no  [s] stop the turn",
        choices=list(_ANSWERS),
        default="n",
        console=out,
    )
    message = None
    if choice == "n":
        message = (
            await asyncio.to_thread(
                Prompt.ask, "  reason for the agent (optional)", default="", console=out
            )
            or None
        )
    # The turn may have moved on while we asked (interrupted, or the wait timed out).
    with contextlib.suppress(SessionError):
        session.respond_approval(item.id, ApprovalDecision(_ANSWERS[choice]), message)
