"""Orders and their lifecycle.

pending -> paid -> shipped -> delivered; pending or paid orders can be cancelled; paid,
shipped and delivered orders can be refunded.
"""

from dataclasses import dataclass, field
from datetime import datetime, timezone
from shop.status import OrderStatus


class OrderError(Exception):
    pass


@dataclass
class Order:
    id: str
    customer: str
    total_cents: int
    status: OrderStatus = OrderStatus.PENDING
    events: list[tuple[str, OrderStatus]] = field(default_factory=list)

    def _set(self, status: OrderStatus) -> None:
        self.events.append((datetime.now(timezone.utc).isoformat(timespec="seconds"), status))
        self.status = status

    def pay(self) -> None:
        if self.status is not OrderStatus.PENDING:
            raise OrderError(f"order {self.id} is {self.status}, cannot pay")
        self._set(OrderStatus.PAID)

    def ship(self) -> None:
        if self.status is not OrderStatus.PAID:
            raise OrderError(f"order {self.id} is {self.status}, cannot ship")
        self._set(OrderStatus.SHIPPED)

    def deliver(self) -> None:
        if self.status is not OrderStatus.SHIPPED:
            raise OrderError(f"order {self.id} is {self.status}, cannot deliver")
        self._set(OrderStatus.DELIVERED)

    def cancel(self) -> None:
        if self.status not in (OrderStatus.PENDING, OrderStatus.PAID):
            raise OrderError(f"order {self.id} is {self.status}, cannot cancel")
        self._set(OrderStatus.CANCELLED)

    @property
    def is_open(self) -> bool:
        return self.status in (OrderStatus.PENDING, OrderStatus.PAID, OrderStatus.SHIPPED)
