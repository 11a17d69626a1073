#!/bin/bash
# Three weeks of the orders API's request logs as logrotate leaves them: api.log (today),
# api.log.1 (plain, delaycompress), api.log.2.gz and older. The service switched from
# key=value lines (durations in seconds) to JSON lines (milliseconds) on 2026-11-26.
set -euo pipefail
cd /app
python3 - <<'PY'
import datetime as dt, gzip, json, math, random
from pathlib import Path

rng = random.Random(20261130)
logs = Path("logs"); logs.mkdir(exist_ok=True)
first, last = dt.date(2026, 11, 10), dt.date(2026, 11, 30)
switch = dt.date(2026, 11, 26)
endpoints = [  # method, path template, weight, median ms
    ("GET", "/api/orders", 30, 42.0),
    ("GET", "/api/orders?page={p}", 12, 55.0),
    ("GET", "/api/orders?status=open&page={p}", 8, 61.0),
    ("GET", "/api/orders/{id}", 25, 180.0),
    ("POST", "/api/orders", 8, 240.0),
    ("GET", "/api/customers/{id}", 10, 35.0),
    ("GET", "/healthz", 40, 1.2),
]
weights = [e[2] for e in endpoints]
noise = [
    "WARNING db pool: %d connections in use (limit 64)",
    "INFO cache: refreshed product catalogue (%d items)",
    "WARNING rate limiter: client %d throttled",
]
events = []  # (timestamp, line) over all days, rotated into files afterwards
for n in range((last - first).days + 1):
    day = first + dt.timedelta(days=n)
    drift = 1.0 + 0.07 * n  # the orders table keeps growing
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
    t = start
    while True:
        t += dt.timedelta(seconds=rng.expovariate(1 / 17.0))
        if t.date() != day:
            break
        stamp = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
        if rng.random() < 0.04:
            msg = rng.choice(noise) % rng.randint(1, 999)
            level, text = msg.split(" ", 1)
            if day >= switch:
                events.append((t, json.dumps({"ts": stamp, "level": level.lower(), "msg": text})))
            else:
                events.append((t, f"{stamp} {level} {text}"))
            continue
        if rng.random() < 0.002:
            tb = ["Traceback (most recent call last):",
                  '  File "/srv/api/handlers.py", line 88, in list_orders',
                  "    rows = await db.fetch(query, *args)",
                  "asyncpg.exceptions.QueryCanceledError: canceling statement due to statement timeout"]
            if day >= switch:
                events.append((t, json.dumps({"ts": stamp, "level": "error", "msg": "unhandled", "exc": "\n".join(tb)})))
            else:
                events.append((t, f"{stamp} ERROR unhandled exception\n" + "\n".join(tb)))
        method, template, _, median = rng.choices(endpoints, weights)[0]
        path = template.format(p=rng.randint(2, 40), id=rng.randint(10000, 99999))
        if rng.random() < 0.015:
            status, ms = rng.choice([500, 503, 504]), rng.uniform(1500, 5000)
        else:
            status = 200 if method == "GET" else 201
            if rng.random() < 0.01 and path != "/healthz":
                status = rng.choice([400, 404])
            ms = median * (drift if path.startswith("/api/orders") else 1.0) * math.exp(rng.gauss(0, 0.55))
        if day >= switch:
            rec = {"ts": stamp, "level": "info", "msg": "request", "method": method, "path": path,
                   "status": status, "duration_ms": round(ms, 2), "client": f"10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)}"}
            events.append((t, json.dumps(rec)))
        else:
            events.append((t, f"{stamp} INFO request method={method} path={path} status={status} duration={ms / 1000:.5f}s"))

# logrotate runs at 00:05 each day; api.log holds 2026-11-30 00:05 onwards.
files = {}
for t, line in events:
    cut = dt.datetime.combine(t.date(), dt.time(0, 5), tzinfo=dt.timezone.utc)
    day = t.date() if t >= cut else t.date() - dt.timedelta(days=1)
    files.setdefault(day, []).append(line)
for day, lines in files.items():
    age = (last - day).days
    text = "\n".join(lines) + "\n"
    if age in (3, 9):  # the service was restarted mid-write: one torn line
        k = len(lines) // 2
        lines[k] = lines[k][: len(lines[k]) // 2]
        text = "\n".join(lines) + "\n"
    if age == 0:
        (logs / "api.log").write_text(text)
    elif age == 1:
        (logs / "api.log.1").write_text(text)
    else:
        with open(logs / f"api.log.{age}.gz", "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
                gz.write(text.encode())
PY
