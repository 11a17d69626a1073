"""The agent runtime: creates, resumes and lists threads over one trace store and engine.

No global state: every runtime owns its store connection and its sessions, so an HTTP server,
an LSP server, a CLI run or many RL rollouts in one process each get their own. A thread
resumed from the store is rebuilt from its log; a turn that was running when its process died
was already closed as interrupted by the store when it opened (`traces.recovery`). Each
thread's tools come from a `HarnessFactory`: in this process by default, elsewhere for a
rollout whose tools run in a sandbox (`tools.rpc.remote_harness_factory`).
"""

import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from opencomposer.agent.approvals import tightened
from opencomposer.agent.facts import Facts, MachineFacts, system_prompt
from opencomposer.agent.protocol.common import ApprovalPolicy
from opencomposer.agent.protocol.events import ThreadStartedEvent
from opencomposer.agent.protocol.threads import Thread, TurnLimits, TurnStatus, TurnWithItems
from opencomposer.agent.session import SessionError, ThreadSession
from opencomposer.agent.tools.base import Tool
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.harness_protocol import Harness
from opencomposer.agent.tools.registry import default_tools
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.agent.traces.base import TraceStore
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.agent.workspace_policy import refuse_unsafe_workspace
from opencomposer.config import Settings
from opencomposer.logs import redact_also
from opencomposer.redact import Redactor
from opencomposer.serving.engines.base import Engine

WorkspaceFactory = Callable[[Path], Workspace]
"""Makes the workspace a thread's tools see (LSP replaces reads and writes with the editor's)."""

HarnessFactory = Callable[[Path, str, Sequence[str], Redactor], Awaitable[Harness]]
"""Makes a thread's harness from its workspace, thread id, the names of its tools and its
redactor (the runtime's: whatever the harness finds secret must reach it)."""


class AgentRuntime:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        *,
        store: TraceStore | None = None,
        tools: Sequence[Tool] | None = None,
        workspace_factory: WorkspaceFactory = Workspace,
        facts: Facts | None = None,
        harness_factory: HarnessFactory | None = None,
    ) -> None:
        """`facts`: where prompts' facts (OS, date, git status) come from; this machine's by
        default, fixed ones to reproduce a prompt exactly (a rollout, a golden test).
        `harness_factory`: where threads' tools run; by default a `ToolHarness` in this
        process over `workspace_factory`'s workspace with `tools`."""
        self.settings = settings
        self.engine = engine
        secrets = [
            s.get_secret_value() for s in (settings.engine.api_key, settings.server.token) if s
        ]
        self.redactor = Redactor(secrets)
        redact_also(self.redactor)  # the log masks every thread's secrets too
        self.store = store or SQLiteTraceStore(settings.home / "traces.db", self.redactor)
        self._tools = tools
        self._workspace_factory = workspace_factory
        self._harness_factory = harness_factory or self._local_harness
        self.facts = facts or MachineFacts()
        self._sessions: dict[str, ThreadSession] = {}

    async def _harness(
        self, workspace: Path, thread_id: str, only: Sequence[str] | None = None
    ) -> Harness:
        names = [tool.name for tool in self._tools or default_tools()]
        if only is not None:
            unknown = sorted(set(only) - set(names))
            if unknown:
                raise SessionError(
                    f"no tool named {', '.join(unknown)}; the tools are {', '.join(sorted(names))}",
                    kind="invalid_request",
                )
            names = [name for name in names if name in only]
        return await self._harness_factory(workspace, thread_id, names, self.redactor.child())

    async def _local_harness(
        self, workspace: Path, thread_id: str, names: Sequence[str], redactor: Redactor
    ) -> Harness:
        return ToolHarness(
            self._workspace_factory(workspace),
            self.settings.tools,
            self.settings.home,
            tools=[tool for tool in self._tools or default_tools() if tool.name in names],
            thread_id=thread_id,
            redactor=redactor,
            models_dir=self.settings.models_dir,
        )

    async def start_thread(
        self,
        workspace: Path,
        *,
        title: str | None = None,
        model: str | None = None,
        approval_policy: ApprovalPolicy | None = None,
        limits: TurnLimits | None = None,
        tools: Sequence[str] | None = None,
    ) -> ThreadSession:
        """A new thread in `workspace`; `limits` and `tools` (a subset, by name) hold for all
        of its turns, and for the thread when it is resumed."""
        root = workspace.expanduser().resolve()
        refuse_unsafe_workspace(root, self.settings)  # for every transport, whatever its roots
        if not root.is_dir():
            raise SessionError(f"workspace {workspace} is not a folder", kind="invalid_request")
        thread = Thread(
            id=f"thr_{uuid.uuid4().hex[:16]}",
            workspace=str(root),
            title=title,
            model=model or self.settings.engine.model,
            approval_policy=tightened(self.settings.agent.approval, approval_policy),
            limits=limits or TurnLimits(),
            tools=sorted(set(tools)) if tools is not None else None,
        )
        harness = await self._harness(root, thread.id, thread.tools)
        thread = harness.redactor.redact_data(thread)  # a client's title may hold a secret
        prompt = system_prompt(harness, self.facts)
        self.store.create_thread(thread, prompt)
        session = ThreadSession(
            thread,
            settings=self.settings,
            engine=self.engine,
            store=self.store,
            harness=harness,
            system_prompt=prompt,
            facts=self.facts,
        )
        session.log.emit(ThreadStartedEvent, thread=thread)
        self._sessions[thread.id] = session
        return session

    async def open_thread(self, thread_id: str) -> ThreadSession:
        """The live session of a thread, resuming it from the store if needed."""
        if thread_id in self._sessions:
            return self._sessions[thread_id]
        thread = self.store.thread(thread_id)
        if thread is None:
            raise SessionError(f"no thread {thread_id}", kind="not_found")
        root = Path(thread.workspace)
        refuse_unsafe_workspace(root, self.settings)  # a thread made before the rule existed
        if not root.is_dir():
            raise SessionError(
                f"the workspace of thread {thread_id} ({root}) no longer exists",
                kind="invalid_request",
            )
        last = self.store.last_turn_id(thread_id)
        running = self.store.turn(last) if last else None
        if running is not None and running.status == TurnStatus.in_progress:
            # The store closed every turn of a dead process when it opened: this one runs
            # in another live opencomposer sharing the trace store.
            raise SessionError(
                f"thread {thread_id} has turn {last} running in another opencomposer process",
                kind="conflict",
            )
        session = ThreadSession(
            thread,
            settings=self.settings,
            engine=self.engine,
            store=self.store,
            harness=await self._harness(root, thread.id, thread.tools),
            system_prompt=self.store.system_prompt(thread_id),
            items=self.store.items(thread_id),
            facts=self.facts,
        )
        self._sessions[thread.id] = session
        return session

    async def close_thread(self, thread_id: str) -> None:
        """Let a thread's live session go (a running turn is interrupted, its harness
        stopped); the thread stays in the store and can be opened again."""
        session = self._sessions.pop(thread_id, None)
        if session is not None:
            await session.close()

    def running_turns(self) -> int:
        """Turns running now, across the open threads."""
        return sum(session.running is not None for session in self._sessions.values())

    def list_threads(
        self, limit: int = 50, cursor: str | None = None, workspace: str | None = None
    ) -> tuple[list[Thread], str | None]:
        return self.store.list_threads(limit, cursor, workspace)

    def read_thread(self, thread_id: str) -> tuple[Thread, list[TurnWithItems]]:
        session = self._sessions.get(thread_id)
        thread = session.thread if session else self.store.thread(thread_id)
        if thread is None:
            raise SessionError(f"no thread {thread_id}", kind="not_found")
        return thread, self.store.turns(thread_id)

    async def close(self) -> None:
        """Interrupt running turns, stop every harness, close the store."""
        for session in list(self._sessions.values()):
            await session.close()
        self._sessions.clear()
        self.store.close()
