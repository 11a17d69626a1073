#!/bin/bash
# The day's batches and a week of the worker's logs: thousands of harmless warnings, and the
# one traceback that matters.
set -euo pipefail
cd /app
python3 - <<'PY'
import json, random
from pathlib import Path

rng = random.Random(20261203)
data = Path("data"); data.mkdir(exist_ok=True)
queues = ["email", "billing", "exports"]
for n in range(1, 41):
    jobs = [] if n == 29 else [
        {"id": f"{n}-{i}", "seconds": round(rng.uniform(0.2, 30.0), 3)} for i in range(rng.randint(1, 12))
    ]
    (data / f"batch-{n:03d}.json").write_text(json.dumps({"id": n, "queue": queues[n % 3], "jobs": jobs}))

logs = Path("logs"); logs.mkdir(exist_ok=True)
lines = []
noise = [
    "WARNING config: option 'timeout' is deprecated, use 'timeout_s'",
    "WARNING db: slow query (%d ms) SELECT * FROM jobs WHERE queue = ?",
    "WARNING http: retrying POST /hooks/notify (attempt %d)",
    "WARNING cache: miss rate %d%% above threshold",
    "INFO worker: heartbeat ok (%d jobs in flight)",
]
for i in range(6000):
    day = 24 + i // 1000
    stamp = f"2026-11-{day:02d}T{(i // 60) % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}Z"
    message = rng.choice(noise)
    if "%d" in message:
        message = message % rng.randint(2, 900)
    lines.append(f"{stamp} {message}")
    if i in (4100, 5100):
        lines += [
            f"{stamp} ERROR nightly: report job failed",
            "Traceback (most recent call last):",
            '  File "/app/jobs/report.py", line 30, in main',
            "    out.write_text(json.dumps(build_report(batches), indent=2, sort_keys=True))",
            '  File "/app/jobs/report.py", line 21, in build_report',
            "    queue[f\"batch_{batch['id']}_mean\"] = average_duration(batch)",
            '  File "/app/jobs/report.py", line 12, in average_duration',
            "    return round(sum(durations) / len(durations), 3)",
            "ZeroDivisionError: division by zero",
        ]
(logs / "worker.log").write_text("\n".join(lines) + "\n")
PY
