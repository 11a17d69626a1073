"""p95 latency (ms) of one endpoint over a UTC date range, from every log file logrotate kept."""

import datetime as dt
import gzip
import json
import math
import re
import sys
from pathlib import Path

LOGS = Path(__file__).resolve().parent.parent / "logs"
KV = re.compile(r"^(\S+) INFO request method=(\S+) path=(\S+) status=(\d+) duration=([\d.]+)s$")


def lines(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        yield from f


def requests():
    """(timestamp, method, path, ms) of every request line, in either log format."""
    for path in sorted(LOGS.glob("api.log*")):
        for line in lines(path):
            line = line.strip()
            if line.startswith("{"):
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # torn line
                if rec.get("msg") != "request":
                    continue
                yield rec["ts"], rec["method"], rec["path"], float(rec["duration_ms"])
            elif m := KV.match(line):
                yield m.group(1), m.group(2), m.group(3), float(m.group(5)) * 1000


def p95(method: str, endpoint: str, first: dt.date, last: dt.date) -> float:
    samples = []
    for stamp, m, path, ms in requests():
        day = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).date()
        if m == method and path.split("?")[0] == endpoint and first <= day <= last:
            samples.append(ms)
    samples.sort()
    return samples[math.ceil(0.95 * len(samples)) - 1]  # nearest rank


if __name__ == "__main__":
    print(f"{p95('GET', '/api/orders', dt.date(2026, 11, 24), dt.date(2026, 11, 30)):.2f}")
