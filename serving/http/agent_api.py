"""The agent protocol over HTTP: threads, turns streamed as Server-Sent Events, control
requests (interrupt, steer, approvals) and the training export.

Every payload is one of the protocol's models, so HTTP carries the same JSON as LSP. A turn's
progress is the thread's event log read live: the SSE `id` is the event's `seq`, which lets a
client that lost its connection resume with `Last-Event-ID` (or `?after_seq`, which a
browser's EventSource can set on its first connection) without a gap or a repeat. The turn
itself belongs to the thread, not to the request: a dropped client does not stop it unless
the client asked for that (`cancel_on_disconnect`).

Errors are `{"error": {"kind", "message"}}`: 404 for an unknown thread, turn or approval, 409
for a conflict (a turn already running), 400 for a malformed or invalid request.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from opencomposer.agent.api import AgentAPI
from opencomposer.agent.protocol.common import ProtocolModel
from opencomposer.agent.protocol.events import Event, TurnCompletedEvent
from opencomposer.agent.protocol.methods import (
    MAX_SEQ,
    ApprovalAnswer,
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
    ThreadUndoParams,
    ThreadUndoResponse,
    TurnInterruptParams,
    TurnInterruptResponse,
    TurnStartInput,
    TurnStartParams,
    TurnSteerInput,
    TurnSteerParams,
    TurnSteerResponse,
    UndoScope,
)
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.agent.session import SessionError, ThreadSession
from opencomposer.agent.traces.export import iter_threads
from opencomposer.serving.http.errors import (
    INSUFFICIENT_STORAGE,
    describe,
    translating_route,
    validation_problems,
)
from opencomposer.serving.http.state import server_state

HEARTBEAT_SECONDS = 15.0
"""Silence after which a stream sends a comment, so proxies and clients keep it open."""

STATUS_BY_KIND = {
    "not_found": 404,
    "conflict": 409,
    "invalid_request": 400,
    "forbidden": 403,
    "data_folder_full": INSUFFICIENT_STORAGE,
}
"""HTTP status for each `SessionError.kind`."""

SSE_MEDIA_TYPE = "text/event-stream"
# Stop proxies from buffering or caching a live stream.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

Params = TypeVar("Params", bound=ProtocolModel)
Stop = Callable[[Event], bool]
"""Whether an event is the last one a stream sends."""


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"kind": kind, "message": message}}, status_code=status)


def _agent_error(exc: Exception) -> Response | None:
    """Session errors and invalid requests in the protocol's error shape."""
    if isinstance(exc, SessionError):
        return error_response(STATUS_BY_KIND.get(exc.kind, 400), exc.kind, exc.message)
    if isinstance(exc, RequestValidationError):
        return error_response(400, "invalid_request", describe(validation_problems(exc)[:5]))
    return None


router = APIRouter(prefix="/v1", route_class=translating_route(_agent_error))


# ---------------------------------------------------------------------- request bodies
# The protocol's params less what the URL says (`TurnSteerInput` and the like), joined again
# with the path by `with_path`.


class TurnStartBody(TurnStartInput):
    cancel_on_disconnect: bool = False
    """Interrupt the turn if this request's stream is dropped before the turn ends."""


def with_path(params: type[Params], body: ProtocolModel, **path: str) -> Params:
    """The params a body and its URL make together (the body is already validated)."""
    fields = {name: getattr(body, name) for name in params.model_fields if name not in path}
    return params.model_construct(**{**fields, **path})


# ---------------------------------------------------------------------- dependencies


def runtime(request: Request) -> AgentRuntime:
    return server_state(request).runtime


Runtime = Annotated[AgentRuntime, Depends(runtime)]


async def thread_session(thread_id: str, runtime: Runtime) -> ThreadSession:
    """The live session of the thread in the path (resumed from the store if needed)."""
    return await runtime.open_thread(thread_id)


Session = Annotated[ThreadSession, Depends(thread_session)]


def agent_methods(runtime: Runtime) -> AgentAPI:
    return AgentAPI(runtime, lambda: runtime.settings.server.workspace_roots)


Methods = Annotated[AgentAPI, Depends(agent_methods)]


def require_thread(runtime: AgentRuntime, thread_id: str) -> None:
    """An unknown thread is a 404, not an empty answer."""
    if runtime.store.thread(thread_id) is None:
        raise SessionError(f"no thread {thread_id}", kind="not_found")


# ---------------------------------------------------------------------- threads


@router.post("/threads")
async def start_thread(params: ThreadStartParams, methods: Methods) -> ThreadStartResponse:
    """The workspace must lie inside one of `server.workspace_roots`."""
    return await methods.thread_start(params)


@router.get("/threads")
async def list_threads(
    methods: Methods,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    workspace: str | None = None,
) -> ThreadListResponse:
    return await methods.thread_list(
        ThreadListParams(cursor=cursor, limit=limit, workspace=workspace)
    )


@router.get("/threads/{thread_id}")
async def read_thread(thread_id: str, methods: Methods) -> ThreadReadResponse:
    """The thread, its turns and items, and the `seq` to resume its event stream after."""
    return await methods.thread_read(ThreadReadParams(thread_id=thread_id))


@router.post("/threads/{thread_id}/undo")
async def undo(thread_id: str, body: UndoScope, methods: Methods) -> ThreadUndoResponse:
    """Put back the agent's edits; files changed since it wrote them are reported (409 while
    a turn runs)."""
    return await methods.thread_undo(ThreadUndoParams(thread_id=thread_id, **body.model_dump()))


@router.get("/threads/{thread_id}/events")
async def thread_events(
    thread_id: str,
    methods: Methods,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
) -> ThreadEventsResponse:
    return await methods.thread_events(
        ThreadEventsParams(thread_id=thread_id, after_seq=after_seq, limit=limit)
    )


# ---------------------------------------------------------------------- streams


def sse_frame(event: Event) -> str:
    return f"id: {event.seq}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n"


class EventSource(Protocol):
    """A thread subscription or one turn's stream: events to read, then to close."""

    def __anext__(self) -> Any: ...

    def close(self) -> None: ...


async def sse_frames(events: EventSource, stop: Stop | None = None) -> AsyncIterator[str]:
    """The events as SSE frames, until they end or up to and including the one `stop`
    accepts, with a comment after each `HEARTBEAT_SECONDS` of silence. The source is closed
    however the stream ends (a dropped client cancels it mid-wait), which is what tells the
    session this client no longer answers approvals."""
    pending: asyncio.Task[Event] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(events.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=HEARTBEAT_SECONDS)
            if not done:
                yield ": ping\n\n"
                continue
            event = pending.result()
            pending = None
            yield sse_frame(event)
            if stop is not None and stop(event):
                return
    except StopAsyncIteration:  # the turn ended, or the log closed (the server is stopping)
        return
    finally:
        if pending is not None:
            pending.cancel()
        events.close()


def turn_end(turn_id: str) -> Stop:
    return lambda event: isinstance(event, TurnCompletedEvent) and event.turn.id == turn_id


def sse_response(
    frames: AsyncIterator[str], background: BackgroundTask | None = None
) -> StreamingResponse:
    return StreamingResponse(
        frames, media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS, background=background
    )


async def interrupt_if_running(session: ThreadSession, turn_id: str) -> None:
    """Runs once the stream has ended: if it ended before the turn did, the client went."""
    if session.running is not None and session.running.id == turn_id:
        await session.interrupt(turn_id)


@router.post("/threads/{thread_id}/turns")
async def start_turn(thread_id: str, body: TurnStartBody, methods: Methods) -> StreamingResponse:
    """Start a turn and stream its events, from `turn.started` to `turn.completed`."""
    params = with_path(TurnStartParams, body, thread_id=thread_id)
    stream = await methods.stream_turn(params, answers_approvals=True)
    cancel = (
        BackgroundTask(interrupt_if_running, stream.session, stream.turn.id)
        if body.cancel_on_disconnect
        else None
    )
    return sse_response(sse_frames(stream), cancel)


def last_event_id(value: str | None) -> int:
    if value is None:
        return 0
    # isascii: str.isdigit also accepts digits such as "²" that int() refuses; the length
    # first: int() refuses more than 4300 digits, and MAX_SEQ has 19.
    if not (
        value.isascii()
        and value.isdigit()
        and len(value) <= len(str(MAX_SEQ))
        and int(value) <= MAX_SEQ
    ):
        raise SessionError(
            f"Last-Event-ID must be an event seq (0 to {MAX_SEQ}), not {value[:40]!r}",
            kind="invalid_request",
        )
    return int(value)


def seq_reached(last: int) -> Stop:
    return lambda event: event.seq >= last


@router.get("/threads/{thread_id}/events/stream")
async def resume_stream(
    session: Session,
    last_event: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
) -> Response:
    """The events after `Last-Event-ID`, then live ones until the running turn completes;
    when no turn is running, only what was missed. `after_seq` stands in for the header on
    a first connection, which a browser's EventSource cannot give headers; the header wins,
    because a reconnecting EventSource sends it along with the URL it started from."""
    after = last_event_id(last_event) if last_event is not None else after_seq
    running = session.running
    if running is None and after >= session.log.seq:
        return Response(media_type=SSE_MEDIA_TYPE, headers=SSE_HEADERS)
    stop = turn_end(running.id) if running is not None else seq_reached(session.log.seq)
    return sse_response(sse_frames(session.subscribe(after, answers_approvals=True), stop))


# ---------------------------------------------------------------------- control


@router.post("/threads/{thread_id}/turns/{turn_id}/interrupt")
async def interrupt_turn(thread_id: str, turn_id: str, methods: Methods) -> TurnInterruptResponse:
    return await methods.turn_interrupt(TurnInterruptParams(thread_id=thread_id, turn_id=turn_id))


@router.post("/threads/{thread_id}/turns/{turn_id}/steer")
async def steer_turn(
    thread_id: str, turn_id: str, body: TurnSteerInput, methods: Methods
) -> TurnSteerResponse:
    return await methods.turn_steer(
        with_path(TurnSteerParams, body, thread_id=thread_id, turn_id=turn_id)
    )


@router.post("/threads/{thread_id}/approvals/{item_id}")
async def respond_approval(
    thread_id: str, item_id: str, body: ApprovalAnswer, methods: Methods
) -> ApprovalRespondResponse:
    return await methods.approval_respond(
        with_path(ApprovalRespondParams, body, thread_id=thread_id, item_id=item_id)
    )


# ---------------------------------------------------------------------- traces


async def jsonl_lines(
    runtime: AgentRuntime, thread_ids: list[str] | None, for_training: bool
) -> AsyncIterator[str]:
    """One record per line, built as it is sent, so a large export is never held whole."""
    for record in iter_threads(runtime.store, thread_ids=thread_ids, for_training=for_training):
        yield json.dumps(record, ensure_ascii=False) + "\n"


@router.get("/traces/export")
async def export_traces(
    runtime: Runtime,
    for_training: bool = False,
    thread: Annotated[list[str] | None, Query()] = None,
) -> StreamingResponse:
    """Threads as training records (JSONL); `thread` may repeat, and all are exported when
    it is absent. Unknown threads are a 404 before anything is sent."""
    for thread_id in thread or ():
        require_thread(runtime, thread_id)
    return StreamingResponse(
        jsonl_lines(runtime, thread, for_training), media_type="application/x-ndjson"
    )
