"""The plan catalogue."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    code: str
    name: str
    monthly_cents: int
    seats: int


PLANS = {
    p.code: p
    for p in (
        Plan("free", "Free", 0, 1),
        Plan("team", "Team", 4900, 5),
        Plan("business", "Business", 19900, 25),
    )
}


def monthly_price(code: str, extra_seats: int = 0, seat_cents: int = 900) -> int:
    """The plan's monthly price in cents with `extra_seats` beyond those included."""
    if extra_seats < 0:
        raise ValueError("extra_seats must not be negative")
    return PLANS[code].monthly_cents + extra_seats * seat_cents
