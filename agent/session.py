"""A live thread: its item log, event log, tool harness and approval state, and the turn
running in it (at most one).

Everything a turn does to the log goes through here, so each change is one event, stored
before anyone sees it. Transports (HTTP, LSP, the CLI, RL rollouts) drive a session with the
same few calls: `start_turn`, `interrupt`, `steer`, `respond_approval`, `subscribe`.

When the data folder fills up, the store can no longer keep the thread's events: the
session's `EventBacklog` tells them to the clients all the same, and the running turn ends
failed with the folder's name and free space. A turn is not started while the folder has no
room (`SessionError` of kind `data_folder_full`); the first that starts once it has stores
the final state of what the failure left open, so the store ends up whole and consistent.
"""

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from opencomposer.agent.approvals import ApprovalGate
from opencomposer.agent.eventlog import Subscription, ThreadLog
from opencomposer.agent.facts import Facts, MachineFacts, turn_context
from opencomposer.agent.item_log import ItemLog
from opencomposer.agent.protocol.common import ErrorInfo
from opencomposer.agent.protocol.events import (
    ItemCompletedEvent,
    TurnCompletedEvent,
    TurnStartedEvent,
)
from opencomposer.agent.protocol.items import (
    ApprovalDecision,
    ApprovalRequestItem,
    Item,
    ToolCallFields,
    UserInput,
    UserMessageItem,
)
from opencomposer.agent.protocol.methods import ApprovalRequestResponse
from opencomposer.agent.protocol.threads import Thread, Turn, TurnLimits
from opencomposer.agent.summarizer import summary_trigger
from opencomposer.agent.tokens import ContextWindow
from opencomposer.agent.tools.checkpoints import UndoScope
from opencomposer.agent.tools.harness_protocol import (
    Harness,
    HarnessUnavailable,
    PreparedCall,
    UndoOutcome,
)
from opencomposer.agent.traces.backlog import EventBacklog
from opencomposer.agent.traces.base import Outcome, TraceStore, TraceStoreFull
from opencomposer.agent.traces.records import CallChain, edit_outcomes, model_call_record
from opencomposer.agent.turn import ActiveTurn, TurnBudget
from opencomposer.config import Settings
from opencomposer.data_folder import DataFolderFull, ensure_room
from opencomposer.serving.engines.base import (
    Capture,
    Engine,
    GenerationRequest,
    GenerationResult,
)
from opencomposer.serving.engines.errors import EngineError

log = logging.getLogger(__name__)

# Assumed when neither the config nor the engine says how long the context may be.
DEFAULT_CONTEXT_WINDOW = 32_768
_CAPTURE_ALL = Capture(token_ids=True, logprobs=True, routed_experts=True, spec_stats=True)


class SessionError(Exception):
    """A request the session cannot honour in its current state (a turn already running, no
    such turn or approval). `kind` is what transports report."""

    kind = "conflict"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if kind:
            self.kind = kind


def folder_full(exc: DataFolderFull) -> SessionError:
    """The data folder's lack of room as transports report a refused request."""
    return SessionError(exc.message, kind=exc.kind)


def refuse_when_full(folder: Path) -> None:
    """SessionError `data_folder_full` when the data folder has no room for more work."""
    try:
        ensure_room(folder)
    except DataFolderFull as exc:
        raise folder_full(exc) from None


@dataclass
class _Running:
    turn: Turn
    task: "asyncio.Task[Turn]"
    active: ActiveTurn


class ThreadSession:
    def __init__(
        self,
        thread: Thread,
        *,
        settings: Settings,
        engine: Engine,
        store: TraceStore,
        harness: Harness,
        system_prompt: str,
        items: Sequence[Item] = (),
        facts: Facts | None = None,
    ) -> None:
        self.thread = thread
        self.settings = settings
        self.engine = engine
        self.store = store
        self.harness = harness
        self.facts = facts or MachineFacts()
        self.backlog = EventBacklog(store, self._store_full)
        self.log = ThreadLog(self.backlog, thread.id, harness.redactor, harness.secret_files)
        self.log.on_unsubscribe = self._approvers_changed
        self.item_log = ItemLog(self.log, system_prompt, items)
        self.gate = ApprovalGate(
            thread.approval_policy, floor=settings.agent.approval, grants=_grants(items)
        )
        self.capture = _CAPTURE_ALL if settings.agent.capture else Capture()
        self._window: ContextWindow | None = None
        self._calls = CallChain()
        self._approvals: dict[str, asyncio.Future[ApprovalRequestResponse]] = {}
        self._running: _Running | None = None
        self._last_ended: Turn | None = None
        self._catching_up = asyncio.Lock()
        self._turns_started = 0  # by this session: only those have edits to report at close
        self._closed = False
        self._starting = False

    @property
    def items(self) -> Sequence[Item]:
        """The thread's items in log order, as stored (secrets masked)."""
        return self.item_log.items

    def item(self, item_id: str) -> Item:
        return self.item_log.item(item_id)

    # ------------------------------------------------------------------ turns

    @property
    def running(self) -> Turn | None:
        return self._running.turn if self._running else None

    async def start_turn(self, content: list[UserInput], limits: TurnLimits | None = None) -> Turn:
        """Start a turn for this request, within `limits` as well as the thread's; its
        progress arrives as events."""
        if self._running is not None:
            raise SessionError(
                f"turn {self._running.turn.id} is still running; interrupt it "
                "or add input to it with steer"
            )
        if self._starting:  # another request is between this check and its turn's start
            raise SessionError(
                "a turn is starting in this thread; add input to it with steer once it runs"
            )
        self._starting = True
        try:
            await self.catch_up_store()
            await self._record_followup()
            turn = Turn(id=f"turn_{uuid.uuid4().hex[:12]}", thread_id=self.thread.id)
            context = await turn_context(self.harness, self.items, self.facts)
        except DataFolderFull as exc:  # the checkpoints, asked what became of the last edits
            raise folder_full(exc) from None
        finally:
            self._starting = False
        # The user may have written a .env file since the last turn: known before anything
        # of this turn (the request, the model's words) goes out.
        await self.harness.refresh_secrets()
        self.log.emit(TurnStartedEvent, turn=turn)
        if self.thread.title is None:
            self._retitle(content)
        self.item_log.add(
            UserMessageItem(
                id=self.item_log.new_id(), turn_id=turn.id, content=content, context=context
            ),
            complete=True,
        )
        active = ActiveTurn(
            turn,
            log=self.item_log,
            engine=self.engine,
            harness=self.harness,
            gate=self.gate,
            settings=self.settings.agent,
            open_window=self._context_window,
            ask_approval=self.ask_approval,
            record_call=self.record_call,
            capture=self.capture,
            model=self.thread.model,
            budget=TurnBudget.of(self.settings.agent, self.thread.limits, limits),
        )
        task = asyncio.create_task(self._run(active), name=f"turn {turn.id}")
        self._running = _Running(turn, task, active)
        self._turns_started += 1
        return turn

    async def run_turn(self, content: list[UserInput]) -> Turn:
        """Start a turn and wait for it to end."""
        turn = await self.start_turn(content)
        return await self.wait(turn.id)

    async def _run(self, active: ActiveTurn) -> Turn:
        turn = await active.run()
        self._last_ended = turn
        try:
            self.log.emit(TurnCompletedEvent, turn=turn)
            self.thread = self.thread.model_copy(update={"updated_at": datetime.now(UTC)})
            self.store.update_thread(self.thread)
        finally:
            self._running = None
        # What the caller gets is what clients were told: the turn as redacted.
        return self.harness.redactor.redact_data(turn)

    def _store_full(self, failure: TraceStoreFull) -> None:
        """The store's folder is full, so nothing the running turn does can be recorded: it
        ends failed with that (its clients still hear how, from the backlog)."""
        running = self._running
        if running is None:
            return
        running.active.abort(ErrorInfo(kind=failure.kind, message=failure.message))
        if running.active.started:  # else it fails as soon as it runs
            running.task.cancel()

    async def catch_up_store(self) -> None:
        """Before a turn: room in the data folder, and, after the store was full, the store
        given the final state of the last turn (its items and itself, as they ended), which
        its clients were told but it could not keep. SessionError `data_folder_full` while
        it still cannot. Transports call it before they subscribe to the turn, so that a
        turn's stream does not carry the last one's end."""
        refuse_when_full(self.settings.home)
        async with self._catching_up:
            if self.backlog.failure is None or self._running is not None:
                return  # nothing to store, or not yet: the running turn is still ending
            self.backlog.retry()
            ended = self._last_ended
            if ended is not None:
                self._store_final_state(ended)
            self.store.update_thread(self.thread)
            try:
                await self.backlog.settled()
            except TraceStoreFull as exc:
                raise folder_full(exc) from None

    def _store_final_state(self, ended: Turn) -> None:
        """Complete in the store each item of `ended` it lacks or holds otherwise, then the
        turn itself: upserts, so what the store kept before it filled up is kept."""
        stored = next((t for t in self.store.turns(self.thread.id) if t.id == ended.id), None)
        kept = {item.id: item for item in stored.items} if stored is not None else {}
        for item in self.items:
            if item.turn_id == ended.id and kept.get(item.id) != item:
                self.log.emit(ItemCompletedEvent, item=item)
        if stored is None or stored.status != ended.status:
            self.log.emit(TurnCompletedEvent, turn=ended)

    async def wait(self, turn_id: str) -> Turn:
        running = self._running
        if running is not None and running.turn.id == turn_id:
            return await asyncio.shield(running.task)
        turn = self.store.turn(turn_id)
        if turn is None or turn.thread_id != self.thread.id:
            raise SessionError(f"no turn {turn_id} in this thread", kind="not_found")
        return turn

    async def interrupt(self, turn_id: str | None = None) -> Turn:
        """Stop the running turn: the model stream is closed, a running command is killed, and
        open items end as interrupted. A turn that already ended is returned as it ended."""
        running = self._running
        if running is None or (turn_id is not None and running.turn.id != turn_id):
            if turn_id is None:
                raise SessionError("no turn is running", kind="not_found")
            return await self.wait(turn_id)
        while not running.active.started:  # a task cancelled before it runs cannot clean up
            await asyncio.sleep(0)
        running.task.cancel()
        return await asyncio.shield(running.task)

    def steer(self, turn_id: str, content: list[UserInput]) -> str:
        """Add input to the running turn; the model sees it at its next step. Returns the id
        of the user_message item that will carry it."""
        running = self._running
        if running is None or running.turn.id != turn_id:
            raise SessionError(f"turn {turn_id} is not running", kind="not_found")
        item = UserMessageItem(
            id=self.item_log.new_id(), turn_id=turn_id, content=content, steer=True
        )
        running.active.steer(item)
        return item.id

    # ------------------------------------------------------------------ approvals

    async def ask_approval(
        self, target: ToolCallFields, call: PreparedCall, reason: str
    ) -> ApprovalRequestResponse:
        """Ask the clients whether `call` may run. Nobody to ask, or nobody answering in time,
        is a denial, never a silent approval."""
        item = self.item_log.add(
            ApprovalRequestItem(
                id=self.item_log.new_id(),
                turn_id=target.turn_id,
                target_item_id=target.id,
                tool=call.tool,
                action_class=call.action_class,
                summary=call.summary,
                reason=f"approval needed by {reason}",
            )
        )
        if self.log.approvers() == 0:
            return self._decide(
                item.id,
                ApprovalDecision.deny,
                "no_client",
                "No client was connected to approve it.",
            )
        future: asyncio.Future[ApprovalRequestResponse] = asyncio.get_running_loop().create_future()
        self._approvals[item.id] = future
        try:
            async with asyncio.timeout(self.settings.agent.approval_timeout):
                return await future
        except TimeoutError:
            timeout = self.settings.agent.approval_timeout
            return self._decide(
                item.id,
                ApprovalDecision.deny,
                "no_client",
                f"Nobody answered within {timeout:g} seconds.",
            )
        finally:
            self._approvals.pop(item.id, None)
            if not future.done():  # the turn ended (interrupt, wall time) while it waited
                future.cancel()

    def awaits_approval(self, item_id: str) -> bool:
        """Whether the approval request is still waiting for an answer (a client replaying
        the log must not ask again about one decided long ago)."""
        future = self._approvals.get(item_id)
        return future is not None and not future.done()

    def respond_approval(
        self, item_id: str, decision: ApprovalDecision, message: str | None = None
    ) -> ApprovalRequestItem:
        """A client's answer to a pending approval request."""
        if not self.awaits_approval(item_id):
            raise SessionError(
                f"no approval request {item_id} is waiting for an answer", kind="not_found"
            )
        self._decide(item_id, decision, "client", message)
        item = self.item(item_id)
        assert isinstance(item, ApprovalRequestItem)
        return item

    def _decide(
        self, item_id: str, decision: ApprovalDecision, by: str, message: str | None
    ) -> ApprovalRequestResponse:
        self.item_log.complete(
            self.item(item_id), decision=decision, decided_by=by, message=message
        )
        answer = ApprovalRequestResponse(decision=decision, message=message)
        future = self._approvals.get(item_id)
        if future is not None and not future.done():
            future.set_result(answer)
        return answer

    def _approvers_changed(self) -> None:
        if self.log.approvers() == 0:
            for item_id in list(self._approvals):
                self._decide(
                    item_id,
                    ApprovalDecision.deny,
                    "no_client",
                    "The client that could approve it disconnected.",
                )

    def subscribe(self, after: int = 0, *, answers_approvals: bool = False) -> Subscription:
        """Events after `after`, stored then live. A subscriber that answers approvals keeps
        approval requests waiting for it; with none left, they are denied."""
        return self.log.subscribe(after, answers_approvals=answers_approvals)

    # ------------------------------------------------------------------ engine, traces

    async def _context_window(self) -> ContextWindow:
        """The model's window, asked of the engine once per thread (the first turn): its size
        does not change, and the meter's calibration carries from turn to turn."""
        if self._window is None:
            agent = self.settings.agent
            size = agent.context_window or await _engine_window(self.engine, self.thread.model)
            trigger = summary_trigger(size, agent.summary_trigger, agent.summary_max_tokens)
            if trigger <= 0:
                raise EngineError(
                    f"a context window of {size} tokens leaves no room after "
                    f"agent.summary_max_tokens = {agent.summary_max_tokens}; lower it"
                )
            self._window = ContextWindow(size, trigger, self.harness.specs())
        return self._window

    def record_call(
        self,
        turn_id: str,
        step: int,
        purpose: str,
        request: GenerationRequest,
        started: datetime,
        clock: float,
        *,
        result: GenerationResult | None = None,
        error: EngineError | None = None,
    ) -> None:
        redactor = self.harness.redactor
        self.store.record_model_call(
            redactor=redactor,
            call=model_call_record(
                thread_id=self.thread.id,
                turn_id=turn_id,
                step=step,
                purpose=purpose,
                segment=self.item_log.summaries,
                request=request,
                started=started,
                duration_ms=int((time.perf_counter() - clock) * 1000),
                engine=getattr(self.engine, "name", type(self.engine).__name__),
                chain=self._calls,
                redactor_version=redactor.version,
                result=result,
                error=error,
            ),
        )

    async def undo(self, scope: UndoScope = "turn", turn_id: str | None = None) -> UndoOutcome:
        """Put back the agent's edits (last edit, a turn, or the whole thread); recorded as an
        outcome, since a revert says the edits were unwanted. A turn of another thread, or of
        none, is not_found, not an empty undo that looks like success."""
        if turn_id is not None:
            turn = self.store.turn(turn_id)
            if turn is None or turn.thread_id != self.thread.id:
                raise SessionError(f"no turn {turn_id} in this thread", kind="not_found")
        outcome = await self.harness.undo(scope, turn_id)
        self.store.record_outcome(
            Outcome(
                self.thread.id,
                "undo",
                {"scope": scope, "restored": [c.path for c in outcome.restored]},
                turn_id=turn_id,
            )
        )
        return outcome

    async def _record_followup(self) -> None:
        """When the user comes back with another request, note what became of the previous
        turn's edits: kept as written, reverted, or changed since."""
        previous = self.store.last_turn_id(self.thread.id)
        if previous is None:
            return
        self.store.record_outcome(Outcome(self.thread.id, "user_followup", turn_id=previous))
        for outcome in await edit_outcomes(self.harness, self.thread.id, previous):
            self.store.record_outcome(outcome)

    async def _record_session_end(self) -> None:
        """The client is going with no further request: note what became of the last turn's
        edits now (an editor's unsaved buffers included), as the follow-up would have. A
        harness that is gone cannot say; the session still closes."""
        last = self.store.last_turn_id(self.thread.id)
        if last is None or not self._turns_started:
            return
        try:
            outcomes = await edit_outcomes(self.harness, self.thread.id, last, when="session_end")
        except (HarnessUnavailable, DataFolderFull) as exc:
            log.warning("the edits of turn %s are not recorded: %s", last, exc.message)
            return
        for outcome in outcomes:
            self.store.record_outcome(outcome)

    def _retitle(self, content: list[UserInput]) -> None:
        text = " ".join(" ".join(getattr(c, "text", None) or "" for c in content).split())
        if text:
            # Masked before it is cut: a secret cut in half would no longer be recognised.
            text = self.harness.redactor.redact(text)
            title = text[:80] + ("…" if len(text) > 80 else "")
            self.thread = self.thread.model_copy(update={"title": title})
            self.store.update_thread(self.thread)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._running is not None:
            await self.interrupt()
        await self._record_session_end()
        self.log.close()
        await self.harness.close()


async def _engine_window(engine: Engine, model: str | None) -> int:
    for info in await engine.models():
        if (model is None or info.id == model) and info.context_window:
            return info.context_window
    log.info(
        "the engine does not report a context window; assuming %d tokens", DEFAULT_CONTEXT_WINDOW
    )
    return DEFAULT_CONTEXT_WINDOW


def _grants(items: Sequence[Item]) -> set:
    """Approvals given for the whole thread, replayed from the log when a thread resumes."""
    grants = set()
    calls = {item.id: item for item in items if isinstance(item, ToolCallFields)}
    for item in items:
        if (
            isinstance(item, ApprovalRequestItem)
            and item.decision == ApprovalDecision.approve_for_thread
            and item.target_item_id in calls
        ):
            grants.add((item.tool, item.action_class))
    return grants
