"""The agent runtime: creates, resumes and lists threads over one trace store and engine.

No global state: every runtime owns its store connection and its sessions, so an HTTP server,
an LSP server, a CLI run or many RL rollouts in one process each get their own. A thread
resumed from the store is rebuilt from its log; a turn that was running when the process died
is closed as interrupted, keeping everything it had streamed.
"""

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from opencomposer.agent.facts import system_prompt
from opencomposer.agent.protocol.common import ApprovalPolicy, ErrorInfo
from opencomposer.agent.protocol.events import (
    ItemDeltaEvent,
    ThreadStartedEvent,
    TurnCompletedEvent,
)
from opencomposer.agent.protocol.items import (
    ItemStatus,
    ToolCallFields,
)
from opencomposer.agent.protocol.threads import (
    StopReason,
    Thread,
    Turn,
    TurnStatus,
    TurnWithItems,
)
from opencomposer.agent.session import SessionError, ThreadSession
from opencomposer.agent.tools.base import Tool
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.agent.traces.store import TraceStore
from opencomposer.config import Settings
from opencomposer.redact import Redactor
from opencomposer.serving.engines.base import Engine

WorkspaceFactory = Callable[[Path], Workspace]
"""Makes the workspace a thread's tools see (LSP replaces reads and writes with the editor's)."""


class AgentRuntime:
    def __init__(self, settings: Settings, engine: Engine, *, store: TraceStore | None = None,
                 tools: Sequence[Tool] | None = None,
                 workspace_factory: WorkspaceFactory = Workspace) -> None:
        self.settings = settings
        self.engine = engine
        secrets = [s.get_secret_value() for s in (settings.engine.api_key, settings.server.token)
                   if s]
        self.redactor = Redactor(secrets)
        self.store = store or TraceStore(settings.home / "traces.db", self.redactor)
        self._tools = tools
        self._workspace_factory = workspace_factory
        self._sessions: dict[str, ThreadSession] = {}

    def _harness(self, workspace: Path, thread_id: str) -> ToolHarness:
        return ToolHarness(self._workspace_factory(workspace), self.settings.tools,
                           self.settings.home, tools=self._tools, thread_id=thread_id,
                           redactor=self.redactor, models_dir=self.settings.models_dir)

    async def start_thread(self, workspace: Path, *, title: str | None = None,
                           model: str | None = None,
                           approval_policy: ApprovalPolicy | None = None) -> ThreadSession:
        root = workspace.expanduser().resolve()
        if not root.is_dir():
            raise SessionError(f"workspace {workspace} is not a folder", kind="invalid_request")
        thread = Thread(id=f"thr_{uuid.uuid4().hex[:16]}", workspace=str(root), title=title,
                        model=model or self.settings.engine.model,
                        approval_policy=approval_policy or self.settings.agent.approval)
        harness = self._harness(root, thread.id)
        prompt = system_prompt(harness)
        self.store.create_thread(thread, prompt)
        session = ThreadSession(thread, settings=self.settings, engine=self.engine,
                                store=self.store, harness=harness, system_prompt=prompt)
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
        if not root.is_dir():
            raise SessionError(f"the workspace of thread {thread_id} ({root}) no longer "
                               "exists", kind="invalid_request")
        session = ThreadSession(thread, settings=self.settings, engine=self.engine,
                                store=self.store, harness=self._harness(root, thread.id),
                                system_prompt=self.store.system_prompt(thread_id),
                                items=self.store.items(thread_id))
        _recover(session)
        self._sessions[thread.id] = session
        return session

    def running_turns(self) -> int:
        """Turns running now, across the open threads."""
        return sum(session.running is not None for session in self._sessions.values())

    def list_threads(self, limit: int = 50, cursor: str | None = None,
                     workspace: str | None = None) -> tuple[list[Thread], str | None]:
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


def _recover(session: ThreadSession) -> None:
    """Close a turn the process died in: its open items end interrupted with what they had
    streamed (replayed from the stored deltas), and the turn says why."""
    turns = session.store.turns(session.thread.id)
    if not turns or turns[-1].status != TurnStatus.in_progress:
        return
    streamed = _streamed(session)
    for item in [i for i in session.items if i.status == ItemStatus.in_progress]:
        text = "".join(streamed.get(item.id, []))
        changes: dict = {}
        if isinstance(item, ToolCallFields):
            changes["output"] = text + "\n[interrupted: the server stopped]"
        elif hasattr(item, "text"):
            changes["text"] = text
        session.complete_item(item, ItemStatus.interrupted, **changes)
    error = ErrorInfo(kind="server_stopped",
                      message="the server stopped while this turn was running")
    turn = Turn.model_validate({**turns[-1].model_dump(exclude={"items"}),
                                "status": TurnStatus.interrupted,
                                "stop_reason": StopReason.interrupted, "error": error})
    session.log.emit(TurnCompletedEvent, turn=turn)


def _streamed(session: ThreadSession) -> dict[str, list[str]]:
    pieces: dict[str, list[str]] = {}
    open_ids = {item.id for item in session.items if item.status == ItemStatus.in_progress}
    for event in session.store.events(session.thread.id):
        if isinstance(event, ItemDeltaEvent) and event.item_id in open_ids:
            pieces.setdefault(event.item_id, []).append(event.delta.text)
    return pieces

