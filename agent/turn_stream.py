"""One turn's events, from `turn.started` to its `turn.completed`, for a transport to send.

The subscription is made at the thread log's `seq` from before the turn started and before
its task first runs (`AgentAPI.stream_turn`), so no event of the turn is missed and nothing
from before it is repeated; a subscriber that answers approvals is counted before the turn
can ask one. Closing the stream (the client went) closes the subscription, which is what
tells the thread this client no longer answers approvals; the turn itself goes on.
"""

from collections.abc import AsyncIterator
from types import TracebackType

from opencomposer.agent.eventlog import Subscription
from opencomposer.agent.protocol.events import Event, TurnCompletedEvent
from opencomposer.agent.protocol.threads import Turn
from opencomposer.agent.session import ThreadSession


class TurnStream:
    def __init__(self, session: ThreadSession, turn: Turn, subscription: Subscription) -> None:
        self.session = session
        self.turn = turn
        """The turn as started."""

        self.ended: Turn | None = None
        """The turn as it ended, once its `turn.completed` has been read."""

        self._subscription = subscription

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        """The next event; the stream ends after this turn's `turn.completed`, or when the
        thread's log closes (the server is stopping)."""
        if self.ended is not None:
            self.close()
            raise StopAsyncIteration
        try:
            event = await anext(self._subscription)
        except StopAsyncIteration:
            self.close()
            raise
        if isinstance(event, TurnCompletedEvent) and event.turn.id == self.turn.id:
            self.ended = event.turn
        return event

    def close(self) -> None:
        self._subscription.close()

    async def __aenter__(self) -> "TurnStream":
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
