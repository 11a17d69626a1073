#!/bin/bash
# This month's usage per tenant, and a week of meterd's log: thousands of ingest and cache
# warnings (some with tracebacks of their own), and last night's failed invoicing run.
set -euo pipefail
cd /app
python3 - <<'PY'
import datetime as dt, json, random, sys, traceback
sys.dont_write_bytecode = True
from decimal import Decimal, ROUND_HALF_UP
from pathlib import Path

sys.path.insert(0, "/app")
from billing.invoice import InvoiceMismatch, build_invoice, line_for
from billing.rates import RATES

rng = random.Random(20261201)
usage_dir = Path("data/usage"); usage_dir.mkdir(parents=True, exist_ok=True)
tenants = ["acme", "bluth", "dunder", "globex", "hooli", "initech", "umbrella", "wonka"]
plans = {"bluth": "pro", "hooli": "pro", "wonka": "pro"}


def right_cents(q, p):
    return int((Decimal(str(q)) * Decimal(str(p)) * 100).quantize(Decimal(1), ROUND_HALF_UP))


def draw():
    return {
        "api_calls_k": round(rng.uniform(50, 9000), 1),
        "build_minutes": round(rng.uniform(10, 4000), rng.choice([0, 1])),
        "egress_gb": round(rng.uniform(1, 900), 1),
        "storage_gb_hours": float(rng.randrange(2000, 200000, 4)),
    }


for tenant in tenants:
    plan = plans.get(tenant, "standard")
    while True:
        usage = draw()
        differs = any(line_for(m, q, plan).amount_cents != right_cents(q, RATES[plan][m]) for m, q in usage.items())
        try:
            build_invoice(tenant, "2026-11", usage, plan)
            fails = False
        except InvoiceMismatch:
            fails = True
        if (fails and differs) if tenant == "globex" else not (fails or differs):
            break
    (usage_dir / f"{tenant}.json").write_text(json.dumps({"tenant": tenant, "period": "2026-11", "plan": plan, "usage": usage}, indent=2))

# last night's failure, exactly as the job logged it
sys.path.insert(0, "/app")
from jobs import nightly
import logging
logging.getLogger().addHandler(logging.NullHandler())
try:
    nightly.run(Path("data"), Path("/tmp/meterd-out"))
except InvoiceMismatch as exc:
    failure = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)).rstrip("\n").split("\n")
else:
    raise SystemExit("expected the nightly run to fail")

events = []  # (time, lines)
agents = [f"agent-{n:03d}" for n in range(1, 60)]
meters = list(RATES["standard"])
start = dt.datetime(2026, 11, 24, 0, 0, 0)
end = dt.datetime(2026, 12, 1, 2, 0, 14)
def stamp(t):
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"
t = start
while True:
    t += dt.timedelta(seconds=rng.expovariate(1 / 70))
    if t >= end + dt.timedelta(hours=6):
        break
    r = rng.random()
    if r < 0.55:
        out = [f"{stamp(t)} WARNING ingest.collector: dropped late sample from {rng.choice(tenants)} ({rng.choice(meters)})"]
    elif r < 0.72:
        out = [f"{stamp(t)} WARNING ingest.clock: clock skew of {rng.randint(2, 90)}s on {rng.choice(agents)}"]
    elif r < 0.80:
        out = [f"{stamp(t)} ERROR cache.store: backend connection reset by peer (pool {rng.randint(1, 8)})"]
    elif r < 0.805:
        out = [
            f"{stamp(t)} WARNING cache.store: cache backend timed out, using in-process cache",
            "Traceback (most recent call last):",
            '  File "/app/cache/store.py", line 19, in get',
            "    return self.backend.get_or_set(key, load, self.ttl)",
            '  File "/usr/lib/python3/dist-packages/redis/client.py", line 1266, in get_or_set',
            '    raise TimeoutError("Timeout reading from socket")',
            "TimeoutError: Timeout reading from socket",
        ]
    else:
        out = [f"{stamp(t)} INFO ingest.collector: batch of {rng.randint(100, 5000)} samples from {rng.choice(agents)}"]
    events.append((t, out))
for n in range(7):
    night = dt.datetime(2026, 11, 24 + n, 2, 0, 11 + n)
    events.append((night, [f"{stamp(night)} INFO jobs.nightly: invoicing done: {len(tenants)} tenants"]))
events.append((end, [f"{stamp(end)} ERROR jobs.nightly: invoicing failed for tenant globex", *failure]))
events.sort(key=lambda e: e[0])
lines = [line for _, out in events for line in out]
Path("logs").mkdir(exist_ok=True)
Path("logs/meterd.log").write_text("\n".join(lines) + "\n")
PY
rm -rf /tmp/meterd-out
