"""The card gateway client (the transport is injected; production passes an HTTP one)."""

from dataclasses import dataclass
from typing import Protocol

from payments.retry import retry


class Transport(Protocol):
    def post(self, path: str, body: dict) -> dict: ...


class Declined(Exception):
    pass


@dataclass
class Gateway:
    transport: Transport
    attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0

    def charge(self, customer: str, cents: int, *, sleep=None) -> str:
        """Charges the customer; the gateway's charge id. Declined cards are not retried."""
        def once() -> str:
            reply = self.transport.post("/charges", {"customer": customer, "amount": cents})
            if reply.get("status") == "declined":
                raise Declined(reply.get("reason", "declined"))
            return reply["id"]

        kwargs = {} if sleep is None else {"sleep": sleep}
        return retry(once, attempts=self.attempts, base_delay=self.base_delay, max_delay=self.max_delay, **kwargs)
