"""What a plain LSP client shows of a running turn: work-done progress while it runs (what the
agent is doing now, cancellable, which interrupts the turn), and the final answer as a
message for turns the client started without the opencomposer protocol (a command or a code
action), which have no other way to reach the user.
"""

import asyncio
import logging
import uuid
from concurrent.futures import Future

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from opencomposer.agent.protocol.events import (
    Event,
    ItemCompletedEvent,
    ItemStartedEvent,
    TurnCompletedEvent,
    TurnStartedEvent,
)
from opencomposer.agent.protocol.items import AgentMessageItem, ToolCallFields
from opencomposer.agent.protocol.threads import TurnStatus
from opencomposer.agent.session import ThreadSession
from opencomposer.agent.tool_items import describe_call

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 4000
"""Characters of a final answer shown in a message; editors show messages in small boxes."""


class TurnFeedback:
    def __init__(self, server: LanguageServer) -> None:
        self.server = server
        self.announce: set[str] = set()
        """Turns whose final answer is shown as a message (started without the protocol)."""
        self._progress: dict[str, str] = {}
        self._answers: dict[str, str] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        """Tasks started here (progress handshakes, interrupts), held until they are done."""

    def __call__(self, session: ThreadSession, event: Event) -> None:
        match event:
            case TurnStartedEvent(turn=turn):
                self._start(session, turn.id)
            case ItemStartedEvent(item=ToolCallFields() as item):
                self._report(item.turn_id, describe_call(item))
            case ItemCompletedEvent(item=AgentMessageItem(text=text, turn_id=turn_id)) if text:
                self._answers[turn_id] = text
            case TurnCompletedEvent(turn=turn):
                self._finish(turn.id, turn.status, turn.error.message if turn.error else None)

    def _start(self, session: ThreadSession, turn_id: str) -> None:
        window = self.server.client_capabilities.window
        if not (window and window.work_done_progress):
            return
        token = f"opencomposer-{uuid.uuid4().hex[:12]}"
        self._progress[turn_id] = token
        task = asyncio.create_task(self._begin(session, turn_id, token))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _begin(self, session: ThreadSession, turn_id: str, token: str) -> None:
        progress = self.server.work_done_progress
        try:
            await progress.create_async(token)
        except Exception as exc:  # the client refused a progress token: go without one
            log.debug("no progress token", extra={"error": repr(exc)})
            self._progress.pop(turn_id, None)
            return
        if turn_id not in self._progress:  # the turn ended while the client answered
            progress.end(token, lsp.WorkDoneProgressEnd())
            return
        progress.begin(
            token,
            lsp.WorkDoneProgressBegin(title="opencomposer", message="thinking", cancellable=True),
        )

        def cancelled_by_user(future: Future[object]) -> None:
            if future.cancelled():
                self._cancel(session, turn_id)

        progress.tokens[token].add_done_callback(cancelled_by_user)

    def _cancel(self, session: ThreadSession, turn_id: str) -> None:
        """The user pressed cancel on the progress: interrupt the turn."""
        if session.running is not None and session.running.id == turn_id:
            task = asyncio.ensure_future(session.interrupt(turn_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _report(self, turn_id: str, message: str) -> None:
        token = self._progress.get(turn_id)
        if token is not None and token in self.server.work_done_progress.tokens:
            self.server.work_done_progress.report(
                token, lsp.WorkDoneProgressReport(message=message[:200])
            )

    def _finish(self, turn_id: str, status: TurnStatus, error: str | None) -> None:
        token = self._progress.pop(turn_id, None)
        if token is not None and token in self.server.work_done_progress.tokens:
            self.server.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=status.value))
            self.server.work_done_progress.tokens.pop(token, None)
        answer = self._answers.pop(turn_id, None)
        if turn_id not in self.announce:
            return
        self.announce.discard(turn_id)
        if status == TurnStatus.completed:
            kind, text = lsp.MessageType.Info, answer or "Done."
        else:
            kind = lsp.MessageType.Warning
            text = f"The turn {status.value}" + (f": {error}" if error else ".")
            if answer:
                text += f"\n\n{answer}"
        if len(text) > MESSAGE_LIMIT:
            text = text[:MESSAGE_LIMIT] + "…"
        self.server.window_show_message(lsp.ShowMessageParams(type=kind, message=text))
