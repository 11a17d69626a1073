"""The agent protocol over one LSP connection: the client's threads, their events as
`opencomposer/event` notifications, and approvals asked of the client.

A thread the client drives (it started it, or started a turn in it) is followed from then on:
every event of its log goes to the client in order, stored first, without gap or repeat, which
is what `seq` lets the client check. Approval requests are asked with the server -> client
request `opencomposer/approval/request` when the client speaks the protocol, and with the plain
`window/showMessageRequest` otherwise, so even an editor with no opencomposer code can answer.
When the connection ends the subscriptions close, and the sessions deny what no one can answer.
"""

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from opencomposer.agent.eventlog import Subscription
from opencomposer.agent.protocol.events import Event, ItemCompletedEvent, ItemStartedEvent
from opencomposer.agent.protocol.items import ApprovalDecision, ApprovalRequestItem
from opencomposer.agent.protocol.methods import ApprovalRequestParams, ApprovalRequestResponse
from opencomposer.agent.session import SessionError, ThreadSession
from opencomposer.lsp.wire import plain_json

log = logging.getLogger(__name__)

EVENT_METHOD = "opencomposer/event"
APPROVAL_METHOD = "opencomposer/approval/request"

# What each button of the plain-LSP approval prompt answers.
_CHOICES = {
    "Approve": ApprovalDecision.approve,
    "Approve for this thread": ApprovalDecision.approve_for_thread,
    "Deny": ApprovalDecision.deny,
    "Stop the turn": ApprovalDecision.abort,
}

EventHook = Callable[[ThreadSession, Event], None]
"""Called for each event of a followed thread (progress reporting, final messages)."""


class AgentLink:
    def __init__(self, server: LanguageServer, *, speaks_protocol: Callable[[], bool]) -> None:
        """`speaks_protocol`: whether the client handles `opencomposer/*` messages."""
        self.server = server
        self.speaks_protocol = speaks_protocol
        self.hooks: list[EventHook] = []
        self._followed: dict[str, asyncio.Task[None]] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        """Approval questions the client has not answered yet, by approval item id."""

    def follow(self, session: ThreadSession, after: int, *, restart: bool = False) -> None:
        """Forward the thread's events after `after` to the client, and have the client answer
        its approvals. Once per thread: a later call changes nothing unless `restart` (the
        client asked to be sent the log again from `after`)."""
        thread_id = session.thread.id
        current = self._followed.get(thread_id)
        if current is not None and not current.done():
            if not restart:
                return
            current.cancel()
        # Subscribed now, before any await, so that nothing logged from here on is missed.
        subscription = session.subscribe(after, answers_approvals=True)
        self._followed[thread_id] = asyncio.create_task(
            self._forward(session, subscription), name=f"lsp events {thread_id}"
        )

    async def close(self) -> None:
        tasks = [*self._followed.values(), *self._pending.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._followed.clear()

    async def _forward(self, session: ThreadSession, subscription: Subscription) -> None:
        try:
            async for event in subscription:
                if self.speaks_protocol():
                    self.server.protocol.notify(EVENT_METHOD, event.model_dump(mode="json"))
                if (
                    isinstance(event, ItemStartedEvent)
                    and isinstance(event.item, ApprovalRequestItem)
                    and event.item.id not in self._pending
                    and session.awaits_approval(event.item.id)
                ):
                    # Asked once per connection, and only while it waits: a replay of the
                    # log (a client subscribing again) passes decided ones by.
                    self._ask(session, event.item)
                elif isinstance(event, ItemCompletedEvent) and event.item.id in self._pending:
                    # Decided without this client (a timeout, an interrupt, another client):
                    # withdraw the question so the editor stops showing it.
                    self._pending.pop(event.item.id).cancel()
                for hook in self.hooks:
                    hook(session, event)
        finally:
            subscription.close()

    def _ask(self, session: ThreadSession, item: ApprovalRequestItem) -> None:
        # Asked in a task of its own: the events keep flowing while the user decides.
        task = asyncio.create_task(self._answer(session, item), name=f"approval {item.id}")
        self._pending[item.id] = task
        task.add_done_callback(lambda _: self._pending.pop(item.id, None))

    async def _request(self, method: str, params: Any) -> Any:
        """A server -> client request that, when its waiter is cancelled, tells the client
        with `$/cancelRequest` (pygls only drops the future)."""
        msg_id = f"opencomposer-{uuid.uuid4().hex}"
        future = self.server.protocol.send_request(method, params, msg_id=msg_id)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.server.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id=msg_id))
            raise

    async def _answer(self, session: ThreadSession, item: ApprovalRequestItem) -> None:
        try:
            if self.speaks_protocol():
                decision, message = await self._ask_with_protocol(session, item)
            else:
                decision, message = await self._ask_with_message(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client failed to answer: deny, and say why
            log.warning("approval request failed", extra={"item": item.id, "error": repr(exc)})
            decision, message = ApprovalDecision.deny, f"the editor did not answer: {exc}"
        # Answered already (another client, the policy, a timeout, an interrupt): no matter.
        with contextlib.suppress(SessionError):
            session.respond_approval(item.id, decision, message)

    async def _ask_with_protocol(
        self, session: ThreadSession, item: ApprovalRequestItem
    ) -> tuple[ApprovalDecision, str | None]:
        params = ApprovalRequestParams(thread_id=session.thread.id, item=item)
        raw = await self._request(APPROVAL_METHOD, params.model_dump(mode="json"))
        answer = ApprovalRequestResponse.model_validate(plain_json(raw))
        return answer.decision, answer.message

    async def _ask_with_message(
        self, item: ApprovalRequestItem
    ) -> tuple[ApprovalDecision, str | None]:
        params = lsp.ShowMessageRequestParams(
            type=lsp.MessageType.Warning,
            message=f"opencomposer wants to run {item.tool}: {item.summary}\n({item.reason})",
            actions=[lsp.MessageActionItem(title=title) for title in _CHOICES],
        )
        chosen = plain_json(await self._request(lsp.WINDOW_SHOW_MESSAGE_REQUEST, params))
        if not isinstance(chosen, dict):  # the prompt was dismissed
            return ApprovalDecision.deny, "the user dismissed the approval prompt"
        return _CHOICES.get(chosen.get("title", ""), ApprovalDecision.deny), None
