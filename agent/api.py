"""The protocol's client -> server methods, implemented once over an `AgentRuntime`.

Transports differ in framing only: LSP calls `dispatch(method, params)` with the JSON it
received; HTTP routes call the typed methods. Both get the same validation, the same workspace
allow-list and the same errors (`SessionError` with a `kind` each transport maps to its own
codes).

Every transport runs a turn through `watch_turn`: subscribe to the thread at its log's `seq`,
then start, with no await in between, so the subscriber sees the turn's first event and is
counted as an approver before the turn can ask anything. `stream_turn` is that for a client
that reads one turn's events (an SSE response, a chat completion, the CLI); the LSP server,
which forwards whole threads to its editor, watches with its own follower.
"""

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from opencomposer.agent.protocol.methods import (
    METHODS,
    METHODS_BY_NAME,
    ApprovalRespondParams,
    ApprovalRespondResponse,
    ThreadEventsParams,
    ThreadEventsResponse,
    ThreadListParams,
    ThreadListResponse,
    ThreadReadParams,
    ThreadReadResponse,
    ThreadStartParams,
    ThreadStartResponse,
    ThreadSubscribeParams,
    ThreadSubscribeResponse,
    ThreadUndoParams,
    ThreadUndoResponse,
    TurnInterruptParams,
    TurnInterruptResponse,
    TurnStartParams,
    TurnStartResponse,
    TurnSteerParams,
    TurnSteerResponse,
)
from opencomposer.agent.protocol.threads import Turn
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import (
    SessionError,
    ThreadSession,
    folder_full,
    refuse_when_full,
)
from opencomposer.agent.tools.errors import ToolError
from opencomposer.agent.turn_stream import TurnStream
from opencomposer.agent.workspace_policy import allowed_workspace, resolved_folder
from opencomposer.data_folder import DataFolderFull

Watch = Callable[[ThreadSession, int], object]
"""Subscribes a transport to a thread's events after a `seq`; called synchronously, just
before the turn starts."""


class AgentAPI:
    METHODS = tuple(m.name for m in METHODS if m.direction == "client_to_server")
    """Every client -> server method; each is served by the method named like it
    (`turn/start` by `turn_start`)."""

    def __init__(self, runtime: AgentRuntime, roots: Callable[[], Sequence[Path]]) -> None:
        """`roots`: the folders threads may be bound to, asked for at each thread start (an
        editor's workspace folders change during a session)."""
        self.runtime = runtime
        self.roots = roots
        self._handlers: dict[str, Callable[[Any], Awaitable[BaseModel]]] = {
            name: getattr(self, name.replace("/", "_")) for name in self.METHODS
        }

    async def dispatch(self, method: str, params: Any) -> dict[str, Any]:
        """Run a method on JSON params; its JSON result. Invalid params are a SessionError of
        kind `invalid_request` naming the fields."""
        handler = self._handlers.get(method)
        if handler is None:
            raise SessionError(f"no method {method}", kind="not_found")
        result = await handler(self.params(method, params))
        return result.model_dump(mode="json")

    def params(self, method: str, params: Any) -> Any:
        """JSON params as the method's params model; a SessionError of kind
        `invalid_request` naming the fields that are wrong."""
        try:
            return METHODS_BY_NAME[method].params.model_validate(params or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors()[:5]
            )
            raise SessionError(
                f"invalid params for {method}: {problems}", kind="invalid_request"
            ) from None

    async def session(self, thread_id: str) -> ThreadSession:
        return await self.runtime.open_thread(thread_id)

    # ------------------------------------------------------------------ threads

    async def thread_start(self, params: ThreadStartParams) -> ThreadStartResponse:
        workspace = allowed_workspace(params.workspace, self.roots())
        refuse_when_full(self.runtime.settings.home)  # a thread the store cannot keep
        session = await self.runtime.start_thread(
            workspace,
            title=params.title,
            model=params.model,
            approval_policy=params.approval_policy,
            limits=params.limits,
            tools=params.tools,
        )
        return ThreadStartResponse(thread=session.thread)

    async def thread_list(self, params: ThreadListParams) -> ThreadListResponse:
        # Threads record their folder resolved; a client may name it through a symlink.
        workspace = str(resolved_folder(params.workspace)) if params.workspace else None
        threads, next_cursor = self.runtime.list_threads(params.limit, params.cursor, workspace)
        return ThreadListResponse(data=threads, next_cursor=next_cursor)

    async def thread_read(self, params: ThreadReadParams) -> ThreadReadResponse:
        thread, turns = self.runtime.read_thread(params.thread_id)
        return ThreadReadResponse(
            thread=thread, turns=turns, last_seq=self.runtime.store.last_seq(params.thread_id)
        )

    async def thread_subscribe(self, params: ThreadSubscribeParams) -> ThreadSubscribeResponse:
        """Checks the thread and says where its log is; the transport does the following."""
        session = await self.session(params.thread_id)
        return ThreadSubscribeResponse(last_seq=session.log.seq)

    async def thread_undo(self, params: ThreadUndoParams) -> ThreadUndoResponse:
        session = await self.session(params.thread_id)
        if session.running is not None:
            raise SessionError(
                f"turn {session.running.id} is running; interrupt it before undoing",
                kind="conflict",
            )
        try:
            outcome = await session.undo(params.scope, params.turn_id)
        except ToolError as exc:
            raise SessionError(exc.message, kind="conflict") from None
        except DataFolderFull as exc:  # the checkpoints could not be marked undone
            raise folder_full(exc) from None
        return ThreadUndoResponse(
            restored=outcome.restored,
            conflicts=outcome.conflicts,
            unrestorable=outcome.unrestorable,
        )

    async def thread_events(self, params: ThreadEventsParams) -> ThreadEventsResponse:
        if self.runtime.store.thread(params.thread_id) is None:
            raise SessionError(f"no thread {params.thread_id}", kind="not_found")
        events = self.runtime.store.events(params.thread_id, params.after_seq, params.limit + 1)
        return ThreadEventsResponse(
            events=events[: params.limit], has_more=len(events) > params.limit
        )

    # ------------------------------------------------------------------ turns

    async def turn_start(self, params: TurnStartParams) -> TurnStartResponse:
        """A turn nobody is subscribed to yet (a client that reads the log afterwards)."""
        _, turn = await self.watch_turn(params, lambda session, after: None)
        return TurnStartResponse(turn=turn)

    async def watch_turn(self, params: TurnStartParams, watch: Watch) -> tuple[ThreadSession, Turn]:
        """Start a turn with `watch` subscribed from before its first event."""
        session = await self.session(params.thread_id)
        await session.catch_up_store()
        watch(session, session.log.seq)
        return session, await session.start_turn(params.input, params.limits)

    async def stream_turn(
        self, params: TurnStartParams, *, answers_approvals: bool = True
    ) -> TurnStream:
        """Start a turn and return its events, up to its `turn.completed`. A stream that
        answers approvals must be read: approval requests wait for its reader."""
        subscriptions = []

        def subscribe(session: ThreadSession, after: int) -> None:
            subscriptions.append(session.subscribe(after, answers_approvals=answers_approvals))

        try:
            session, turn = await self.watch_turn(params, subscribe)
        except BaseException:
            for subscription in subscriptions:
                subscription.close()
            raise
        return TurnStream(session, turn, subscriptions[0])

    async def turn_interrupt(self, params: TurnInterruptParams) -> TurnInterruptResponse:
        session = await self.session(params.thread_id)
        return TurnInterruptResponse(turn=await session.interrupt(params.turn_id))

    async def turn_steer(self, params: TurnSteerParams) -> TurnSteerResponse:
        session = await self.session(params.thread_id)
        return TurnSteerResponse(item_id=session.steer(params.turn_id, params.input))

    async def approval_respond(self, params: ApprovalRespondParams) -> ApprovalRespondResponse:
        session = await self.session(params.thread_id)
        return ApprovalRespondResponse(
            item=session.respond_approval(params.item_id, params.decision, params.message)
        )
