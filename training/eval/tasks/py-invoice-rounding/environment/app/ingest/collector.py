"""Usage samples from the agents, summed per tenant and meter for a billing period."""

import logging
from collections import defaultdict
from datetime import datetime, timedelta

log = logging.getLogger("ingest.collector")
LATE = timedelta(hours=6)


def aggregate(samples: list[dict], period: str, now: datetime) -> dict[str, dict[str, float]]:
    """{tenant: {meter: quantity}} of the samples stamped in `period` (YYYY-MM); samples
    that arrive more than six hours after their stamp are dropped, as the contract says."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in samples:
        stamp = datetime.fromisoformat(s["ts"])
        if not s["ts"].startswith(period):
            continue
        if datetime.fromisoformat(s["received"]) - stamp > LATE:
            log.warning("dropped late sample from %s (%s)", s["tenant"], s["meter"])
            continue
        totals[s["tenant"]][s["meter"]] += s["quantity"]
    return {t: dict(m) for t, m in totals.items()}
