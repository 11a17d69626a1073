"""Terminal tools: run_terminal, and terminal_output / terminal_input / terminal_kill for the
jobs it leaves running.

A command that outlives its soft timeout is not killed: control comes back with its output so
far and a job id, and the model decides whether to wait, read, feed input or kill. Every
result states the exit code or that the command is still running, so a silent command is
never mistaken for a failure.

Every result also carries the sandbox's git guard: it reviews the workspace (what commands
left for the host's git to run is moved aside, and said so, in text and in `data.git_guard`),
and a command that failed on the read-only `.git` is told why in one line, so the model asks
the user instead of retrying.
"""

import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import Field

from opencomposer.agent.protocol.common import ActionClass
from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult, ToolServices
from opencomposer.agent.tools.terminal.classify import classify_command
from opencomposer.agent.tools.terminal.jobs import CommandResult

MAX_TIMEOUT = 600.0

READ_ONLY_GIT = (
    "[note: the sandbox keeps .git, git hooks and git config read-only, so git commands that "
    "change the repository (commit, add, checkout -b, stash, config) fail here; do not retry: "
    "ask the user to run them, or leave the change uncommitted]"
)


def describe(
    result: CommandResult, command: str | None = None, sandbox: str | None = None
) -> ToolResult:
    if result.running:
        waited = f" after {result.duration_ms / 1000:.0f}s" if result.timed_out else ""
        status = (
            f"[still running as job {result.job_id}{waited}; read more with "
            f"terminal_output, send input with terminal_input, stop it with terminal_kill]"
        )
    elif result.exit_code is not None and result.exit_code < 0:
        status = f"[killed by signal {-result.exit_code}]"
    else:
        status = f"[exit code {result.exit_code}]"
    fields = {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "background_id": result.job_id if result.running else None,
    }
    if command is not None:
        fields.update(command=command, cwd=".", sandbox=sandbox)
    data = {
        "output_bytes": result.output_bytes,
        "truncated": result.truncated,
        "running": result.running,
        "job_id": result.job_id,
        "limit": result.limit,
    }
    return ToolResult(text=f"{result.output}\n{status}", fields=fields, data=data)


async def guarded(
    harness: ToolServices, result: CommandResult, described: ToolResult, command: str | None = None
) -> ToolResult:
    """`described` with the git guard's review: what it neutralized since the last result,
    and why a git command failed when the read-only binds refused it."""
    guard = harness.sandbox.guard
    if guard is None:
        return described
    await guard.review()
    if guard.blocked(result.output) or (command is not None and _failed_git_write(result, command)):
        described.text += f"\n{READ_ONLY_GIT}"
    changes = guard.take()
    if changes:
        described.text += (
            "\n[git guard: " + "; ".join(change.line() for change in changes) + ". The "
            "user's git would have run these on the host; the originals are kept outside the "
            "workspace. Tell the user; do not recreate them.]"
        )
        described.data["git_guard"] = [asdict(change) for change in changes]
    return described


def _failed_git_write(result: CommandResult, command: str) -> bool:
    """A command with a git subcommand that changes the repository failed: some fail on the
    read-only `.git` without a word (`git stash` exits 1 silently)."""
    if result.exit_code in (None, 0):
        return False
    return any(
        Path(argv[0]).name == "git"
        and classify_command(shlex.join(argv)).action_class != ActionClass.read_only
        for argv in classify_command(command).argvs
        if argv
    )


class RunTerminalArgs(ToolArgs):
    command: str = Field(min_length=1)
    """Shell command (bash), run from the workspace root. Pagers and prompts are off."""

    timeout: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT)
    """Seconds to wait before returning with partial output while the command keeps running
    (default 30)."""

    background: bool = False
    """Start it as a background job (servers, watchers) and return at once; its stdin stays
    open for terminal_input."""


class RunTerminal(Tool[RunTerminalArgs]):
    name = "run_terminal"
    description = (
        "Run a shell command in a sandbox (workspace writable, network off unless allowed). "
        "Returns output and exit code; a command still running at the timeout keeps running "
        "as a job you can read, feed or kill."
    )
    Args = RunTerminalArgs
    view = "command_execution"

    def view_fields(self, args: RunTerminalArgs) -> dict[str, Any]:
        return {"command": args.command}

    def commands(self, args: RunTerminalArgs) -> list[list[str]]:
        return classify_command(args.command).argvs

    def action_class(self, args: RunTerminalArgs) -> ActionClass:
        return classify_command(args.command).action_class

    def summary(self, args: RunTerminalArgs) -> str:
        return args.command

    async def run(self, args: RunTerminalArgs, ctx: ToolContext) -> ToolResult:
        harness = ctx.harness
        result = await harness.jobs.run(
            args.command,
            cwd=harness.workspace.root,
            timeout=args.timeout or harness.settings.command_timeout,
            background=args.background,
            network=harness.settings.allow_network,
            on_output=ctx.on_output,
        )
        described = await guarded(
            harness, result, describe(result, args.command, harness.sandbox.name), args.command
        )
        unsaved = harness.workspace.unsaved()
        if unsaved:
            # Commands read the disk; the model's reads and edits saw the editor's buffers.
            shown = ", ".join(unsaved[:10]) + (" and more" if len(unsaved) > 10 else "")
            described.text += (
                f"\n[note: the command saw files as saved on disk; the editor "
                f"has unsaved changes in {shown}]"
            )
        return described


class JobArgs(ToolArgs):
    job_id: str
    """Id of a job that run_terminal returned."""


class TerminalOutputArgs(JobArgs):
    wait: float = Field(default=0.0, ge=0, le=MAX_TIMEOUT)
    """Seconds to wait for the job to finish before returning what it printed."""


class TerminalOutput(Tool[TerminalOutputArgs]):
    name = "terminal_output"
    description = "Read what a running or finished job printed since the last read."
    Args = TerminalOutputArgs

    async def run(self, args: TerminalOutputArgs, ctx: ToolContext) -> ToolResult:
        result = await ctx.harness.jobs.output(args.job_id, wait=args.wait)
        return await guarded(ctx.harness, result, describe(result))


class TerminalInputArgs(JobArgs):
    text: str
    """Text to write to the job's stdin; include "\\n" to end a line."""


class TerminalInput(Tool[TerminalInputArgs]):
    name = "terminal_input"
    description = "Send text to the stdin of a background job, then read its output."
    Args = TerminalInputArgs

    def action_class(self, args: ToolArgs) -> ActionClass:
        return ActionClass.writes_workspace

    async def run(self, args: TerminalInputArgs, ctx: ToolContext) -> ToolResult:
        result = await ctx.harness.jobs.write_input(args.job_id, args.text)
        return await guarded(ctx.harness, result, describe(result))


class TerminalKill(Tool[JobArgs]):
    name = "terminal_kill"
    description = "Stop a job and everything it started; returns its last output."
    Args = JobArgs

    async def run(self, args: JobArgs, ctx: ToolContext) -> ToolResult:
        result = await ctx.harness.jobs.kill(args.job_id)
        return await guarded(ctx.harness, result, describe(result))
