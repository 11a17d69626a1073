"""The tool harness: one tool library for editor sessions, HTTP sessions, the CLI and RL.

A call is validated against the tool's argument model and classified for approval
(`prepare`: the call's arguments stay here, the runtime gets a plain `PreparedCall`), run by
its id, and turned into a `CallOutcome`: text for the model (redacted, capped head and tail)
plus the structured view clients render. Every failure, including a bug in a tool, comes back
as an outcome with a typed error; nothing escapes as a crash. State the tools share
(checkpoints, background jobs, the to-do list, code indexes) lives here, one harness per
thread, so many rollouts can run side by side in one process. It is the `Harness` the
runtime drives in process, and the one `rpc` serves to a runtime in another.
"""

import asyncio
import json
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from opencomposer.agent.protocol.items import FileChange, TodoEntry
from opencomposer.agent.tools.base import ArgsT, Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.changes import FileOp, apply_ops, describe
from opencomposer.agent.tools.checkpoints import CheckpointStore, UndoScope
from opencomposer.agent.tools.errors import (
    Conflict,
    InvalidArguments,
    NotFound,
    NotRecorded,
    ToolError,
    UnexpectedEnvironment,
)
from opencomposer.agent.tools.git_status import git_summary
from opencomposer.agent.tools.harness_protocol import (
    CallOutcome,
    EditState,
    PreparedCall,
    UndoOutcome,
)
from opencomposer.agent.tools.indexes import CodeIndexes
from opencomposer.agent.tools.registry import default_tools
from opencomposer.agent.tools.sandbox import Sandbox, detect_sandbox
from opencomposer.agent.tools.search import list_workspace_files
from opencomposer.agent.tools.secret_files import SecretFiles, names_secret_file
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.agent.tools.terminal.jobs import JobManager, OnOutput
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings
from opencomposer.data_folder import DataFolderFull
from opencomposer.redact import Redactor
from opencomposer.serving.engines.base import ToolSpec

log = logging.getLogger(__name__)

# Prepared calls kept for `run`. A turn runs one step's calls before it prepares the next, so
# only a refused or interrupted call (never run) stays longer; the oldest go past this many.
MAX_PREPARED = 256


class ToolHarness:
    def __init__(
        self,
        workspace: Workspace,
        settings: ToolSettings,
        data_dir: Path,
        *,
        tools: Sequence[Tool[Any]] | None = None,
        thread_id: str = "default",
        redactor: Redactor | None = None,
        models_dir: Path | None = None,
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.data_dir = data_dir
        self.thread_id = thread_id
        self.models_dir = models_dir
        self.redactor = redactor or Redactor()
        self.secret_files = SecretFiles(workspace.root, self.redactor)
        self.secret_files.refresh(force=True)  # known before anything of the thread goes out
        # The commands' environment, and what was left out of it masked from the start: a
        # value may reach the model some other way (a config file, a test's output).
        self._env, dropped = scrub_environment(
            os.environ, settings.secret_env, settings.sandbox.env
        )
        for secret in dropped:
            self.redactor.add(secret)
        self.todos: list[TodoEntry] = []
        self._tools: dict[str, Tool[Any]] = {tool.name: tool for tool in (tools or default_tools())}
        self._prepared: OrderedDict[str, tuple[Tool[Any], ToolArgs]] = OrderedDict()
        self.indexes = CodeIndexes(workspace.root, data_dir, models_dir, self.list_files)

    # ------------------------------------------------------------------ catalogue

    @property
    def tools(self) -> dict[str, Tool[Any]]:
        return dict(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [tool.spec() for tool in self._tools.values()]

    # ------------------------------------------------------------------ calls

    @property
    def root(self) -> Path:
        return self.workspace.root

    async def prepare(self, name: str, arguments: dict[str, Any] | str | None) -> PreparedCall:
        """Validate and classify a call; raises ToolError."""
        tool = self._tools.get(name)
        if tool is None:
            raise NotFound(
                f"no tool named {name!r}", hint=f"Available tools: {', '.join(self._tools)}."
            )
        args = _parse_arguments(tool, arguments)
        prepared = PreparedCall(
            id=f"prep_{uuid.uuid4().hex[:16]}",
            tool=tool.name,
            view=tool.view,
            action_class=tool.action_class(args),
            summary=tool.summary(args),
            commands=tool.commands(args),
            view_fields=tool.view_fields(args),
        )
        self._prepared[prepared.id] = (tool, args)
        while len(self._prepared) > MAX_PREPARED:
            self._prepared.popitem(last=False)
        return prepared

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | str | None,
        *,
        call_id: str | None = None,
        turn_id: str | None = None,
        on_output: OnOutput | None = None,
    ) -> CallOutcome:
        """Prepare and run a call at once (no approval: the shell's `opencomposer tool`)."""
        call_id = call_id or f"call_{uuid.uuid4().hex[:16]}"
        try:
            prepared = await self.prepare(name, arguments)
        except ToolError as error:
            return self.failure(call_id, name, error)
        return await self.run(prepared, call_id=call_id, turn_id=turn_id, on_output=on_output)

    async def run(
        self,
        prepared: PreparedCall,
        *,
        call_id: str,
        turn_id: str | None = None,
        on_output: OnOutput | None = None,
    ) -> CallOutcome:
        """Run a prepared call, once. `on_output(stream, text)` receives a command's output
        live."""
        found = self._prepared.pop(prepared.id, None)
        if found is None:
            unknown = NotFound(
                f"no prepared call {prepared.id} (a call runs once, after it is prepared)"
            )
            return self.failure(call_id, prepared.tool, unknown, prepared)
        tool, args = found
        started = time.perf_counter()
        context = ToolContext(harness=self, call_id=call_id, turn_id=turn_id, on_output=on_output)
        try:
            result = await self._run_tool(tool, args, bool(prepared.commands), context)
        except ToolError as error:
            return self.failure(call_id, tool.name, error, prepared, _ms(started))
        except DataFolderFull as full:
            return self.failure(call_id, tool.name, NotRecorded(full.message), prepared)
        except Exception as exc:  # a bug in a tool must not crash the turn
            log.exception("tool %s failed", tool.name, extra={"call_id": call_id})
            crash = UnexpectedEnvironment(f"the {tool.name} tool failed unexpectedly: {exc}")
            return self.failure(call_id, tool.name, crash, prepared, _ms(started))
        text = self._for_model(result.text + self._not_checkpointed(call_id))
        return CallOutcome(
            call_id=call_id,
            tool=tool.name,
            ok=True,
            text=text,
            view=tool.view,
            fields=self.redactor.redact_data(result.fields),  # diffs, matches, paths
            data=self.redactor.redact_data(result.data),
            action_class=prepared.action_class,
            duration_ms=_ms(started),
        )

    async def _run_tool(
        self, tool: Tool[ArgsT], args: ArgsT, runs_commands: bool, context: ToolContext
    ) -> ToolResult:
        """The tool's result, and then (however it ended) what secret files hold brought up
        to date before the result goes anywhere: all of them after a command, which may
        have written one anywhere, or a call or result that names one (it may have made,
        changed or shown it); else as often as REFRESH_INTERVAL allows."""
        touches = runs_commands or names_secret_file(args.model_dump())
        try:
            result = await tool.run(args, context)
        except BaseException:
            self.secret_files.refresh(force=touches)
            raise
        self.secret_files.refresh(force=touches or names_secret_file(result.text))
        return result

    def failure(
        self,
        call_id: str,
        name: str,
        error: ToolError,
        prepared: PreparedCall | None = None,
        duration_ms: int = 0,
    ) -> CallOutcome:
        """The outcome of a call that failed (or was refused) with `error`."""
        return failed_call(call_id, name, error, self._for_model, prepared, duration_ms)

    def _for_model(self, text: str) -> str:
        self.secret_files.refresh()
        return cap_text(self.redactor.redact(text), self.settings.output_cap)

    def _not_checkpointed(self, call_id: str) -> str:
        """A note for the model when the call changed files whose contents checkpoints do
        not keep (secret files, files over `tools.checkpoint_max_bytes`): undo cannot put
        them back."""
        if "checkpoints" not in self.__dict__:
            return ""
        unkept = self.checkpoints.unkept(call_id)
        if not unkept:
            return ""
        shown = [f"{self.workspace.relative(Path(path))} ({why})" for path, why in unkept]
        return f"\nNote: undo cannot restore {', '.join(shown)}."

    # ------------------------------------------------------------------ files

    @cached_property
    def checkpoints(self) -> CheckpointStore:
        return CheckpointStore(
            self.data_dir / "checkpoints",
            self.workspace.root,
            self.thread_id,
            self.settings.checkpoint_max_bytes,
        )

    async def apply(self, ops: Sequence[FileOp], ctx: ToolContext) -> list[FileChange]:
        """Checkpoint and perform a call's file operations as one unit."""
        return await apply_ops(ops, self.workspace, self.checkpoints, ctx.call_id, ctx.turn_id)

    async def undo(self, scope: UndoScope = "edit", turn_id: str | None = None) -> UndoOutcome:
        """Put back the files of the last edit, a turn, or the whole thread. A file someone
        changed since the agent wrote it is reported, not overwritten."""
        restored: list[FileChange] = []
        conflicts: list[str] = []
        undone: list[int] = []
        for item in self.checkpoints.plan_undo(scope, turn_id):
            try:
                current = self.workspace.current_bytes(item.path, _size(item.expected))
            except ToolError:  # unreadable now, or a symlink took its path: left alone
                conflicts.append(self.workspace.relative(item.path))
                continue
            if current != item.expected:
                conflicts.append(self.workspace.relative(item.path))
                continue
            undone.extend(item.change_ids)
            if current == item.restore:  # e.g. created and deleted within the undone range
                continue
            if item.restore is None:
                op = FileOp("delete", item.path, current, None)
                await self.workspace.writer.delete(item.path)
            else:
                op = FileOp(
                    "add" if current is None else "update", item.path, current, item.restore
                )
                await self.workspace.writer.write(item.path, item.restore)
            restored.append(self.redactor.redact_data(describe(op, self.workspace)))
        secret, secret_changes = self.checkpoints.unrestorable(scope, turn_id)
        self.checkpoints.mark_undone([*undone, *secret_changes])
        if conflicts and not restored:
            raise Conflict(
                f"nothing undone: {', '.join(conflicts)} changed since the agent wrote them"
            )
        return UndoOutcome(
            restored=restored,
            conflicts=conflicts,
            unrestorable=[self.workspace.relative(path) for path in secret],
        )

    async def edit_states(self, turn_id: str) -> list[EditState]:
        """What became of each file the turn changed (an editor's unsaved buffer counts)."""
        states = []
        for restore in self.checkpoints.plan_undo("turn", turn_id):
            limit = max(_size(restore.expected), _size(restore.restore))
            current = self.workspace.current_bytes(restore.path, limit)
            state: Literal["kept", "reverted", "modified"] = (
                "kept"
                if current == restore.expected
                else "reverted"
                if current == restore.restore
                else "modified"
            )
            states.append(EditState(self.workspace.relative(restore.path), state))
        return states

    async def refresh_secrets(self) -> None:
        self.secret_files.refresh(force=True)

    # ------------------------------------------------------------------ terminal

    @cached_property
    def sandbox(self) -> Sandbox:
        return detect_sandbox(self.workspace.root, self.data_dir, self.settings.sandbox)

    @cached_property
    def jobs(self) -> JobManager:
        guard = self.sandbox.guard
        return JobManager(
            self.sandbox,
            self.workspace.root,
            self._env,
            self.redactor,
            output_cap=self.settings.output_cap,
            max_lifetime=self.settings.sandbox.max_lifetime,
            on_exit=guard.review if guard is not None else None,
        )

    async def git_summary(self) -> str | None:
        return await git_summary(self.jobs, self.workspace.root)

    # ------------------------------------------------------------------ code indexes

    def list_files(self) -> list[Path]:
        """Every file of the workspace that ignore rules keep (what grep and glob see). The
        code indexes call it from worker threads, so it runs ripgrep (in the sandbox) on an
        event loop of its own."""
        return asyncio.run(list_workspace_files(self.workspace.root, self.sandbox))

    async def close(self) -> None:
        """Stop background work and release files (idempotent)."""
        await self.indexes.close()
        jobs = self.__dict__.pop("jobs", None)
        if jobs is not None:
            await jobs.close()
        checkpoints = self.__dict__.pop("checkpoints", None)
        if checkpoints is not None:
            checkpoints.close()


def cap_text(text: str, limit: int) -> str:
    """Keep the head and tail of an over-long text, saying how much was cut and where."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut:,} characters omitted ...]\n{text[-tail:]}"


def failed_call(
    call_id: str,
    name: str,
    error: ToolError,
    for_model: Callable[[str], str],
    prepared: PreparedCall | None = None,
    duration_ms: int = 0,
) -> CallOutcome:
    """The outcome of a call that failed with `error`, its message made fit for the model by
    `for_model` (redacted, capped): every harness builds failures the same way, wherever its
    tools run."""
    info = error.info()
    info.message = for_model(info.message)
    return CallOutcome(
        call_id=call_id,
        tool=name,
        ok=False,
        text=info.message,
        error=info,
        view=prepared.view if prepared else "tool_call",
        action_class=prepared.action_class if prepared else None,
        duration_ms=duration_ms,
    )


def _parse_arguments(tool: Tool[ArgsT], arguments: dict[str, Any] | str | None) -> ArgsT:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise InvalidArguments(
                f"arguments are not valid JSON: {exc}",
                hint="Send one JSON object with the tool's fields.",
            ) from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidArguments(f"arguments must be a JSON object, got {type(arguments).__name__}")
    try:
        return tool.Args.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        fields = ", ".join(tool.Args.model_fields)
        raise InvalidArguments(
            f"{tool.name}: {problems}", hint=f"{tool.name} takes: {fields}."
        ) from None


def _size(image: bytes | None) -> int:
    """How much of a file to read to compare it with `image`: a larger one differs."""
    return 0 if image is None else len(image)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
