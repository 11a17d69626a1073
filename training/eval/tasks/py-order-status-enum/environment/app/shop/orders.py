"""Orders and their lifecycle.

pending -> paid -> shipped -> delivered; pending or paid orders can be cancelled; paid,
shipped and delivered orders can be refunded.
"""

from dataclasses import dataclass, field
from datetime import datetime, timezone


class OrderError(Exception):
    pass


@dataclass
class Order:
    id: str
    customer: str
    total_cents: int
    status: str = "pending"
    events: list[tuple[str, str]] = field(default_factory=list)

    def _set(self, status: str) -> None:
        self.events.append((datetime.now(timezone.utc).isoformat(timespec="seconds"), status))
        self.status = status

    def pay(self) -> None:
        if self.status != "pending":
            raise OrderError(f"order {self.id} is {self.status}, cannot pay")
        self._set("paid")

    def ship(self) -> None:
        if self.status != "paid":
            raise OrderError(f"order {self.id} is {self.status}, cannot ship")
        self._set("shipped")

    def deliver(self) -> None:
        if self.status != "shipped":
            raise OrderError(f"order {self.id} is {self.status}, cannot deliver")
        self._set("delivered")

    def cancel(self) -> None:
        if self.status not in ("pending", "paid"):
            raise OrderError(f"order {self.id} is {self.status}, cannot cancel")
        self._set("cancelled")

    @property
    def is_open(self) -> bool:
        return self.status in ("pending", "paid", "shipped")
