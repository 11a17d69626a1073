"""Hidden tests of bin/error-report.sh: its report over the generated logs must match a
recount done here, and it must get a small hand-made set of awkward lines right."""

import collections
import datetime as dt
import gzip
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

APP = Path("/app")
SCRIPT = APP / "bin" / "error-report.sh"
LINE = re.compile(r'^(.*?) - (\S+) \[(\d\d)/(\w\w\w)/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-]\d{4})\] "([^"]*)" (\d{3}) ')
MON = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def recount(logs, first, last):
    """{endpoint: (requests, errors)} from every log file, gzipped or not."""
    req, err = collections.Counter(), collections.Counter()
    for f in sorted(Path(logs).glob("*/access.log*")):
        opener = gzip.open if f.name.endswith(".gz") else open
        with opener(f, "rt", encoding="utf-8", errors="replace") as data:
            for line in data:
                m = LINE.match(line)
                if not m:
                    continue
                if not first <= dt.date(int(m[5]), MON[m[4]], int(m[3])) <= last:
                    continue
                parts = m[10].split(" ")
                if len(parts) != 3:
                    continue
                path = parts[1].split("?", 1)[0]
                ep = "/" + "/".join(":id" if s.isdigit() else s for s in path.split("/")[1:])
                req[ep] += 1
                err[ep] += m[11].startswith("5")
    return {e: (req[e], err[e]) for e in req}


def run(logs, first, last):
    done = subprocess.run(
        ["bash", str(SCRIPT), "-f", first, "-t", last, str(logs)],
        cwd=APP, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    lines = [l for l in done.stdout.splitlines() if l.strip()]
    assert lines and lines[0].split() == ["endpoint", "requests", "errors_5xx", "error_rate_pct"], lines[:1]
    rows = []
    for l in lines[1:]:
        cells = l.split()
        assert len(cells) == 4, f"not four columns: {l!r}"
        rows.append((cells[0], int(cells[1]), int(cells[2]), float(cells[3])))
    return rows


def check(rows, want):
    got = {e: (n, k) for e, n, k, _ in rows}
    assert len(got) == len(rows), "an endpoint is listed twice"
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, f"endpoints missing {missing[:5]}, unexpected {extra[:5]}"
    for e, (n, k) in want.items():
        assert got[e] == (n, k), f"{e}: report says {got[e][0]} requests, {got[e][1]} 5xx; the logs have {n}, {k}"
    for e, n, k, rate in rows:
        assert abs(rate - 100 * k / n) <= 0.006, f"{e}: rate {rate}, expected {100 * k / n:.2f}"
    order = [e for e, *_ in rows]
    assert order == sorted(order, key=lambda e: (-want[e][0], e)), "not sorted by requests (most first), then endpoint"


def test_the_week_in_question():
    want = recount(APP / "logs", dt.date(2025, 6, 13), dt.date(2025, 6, 19))
    assert want["/api/login"][0] > 3000
    check(run(APP / "logs", "2025-06-13", "2025-06-19"), want)


def test_a_range_across_the_month_boundary():
    want = recount(APP / "logs", dt.date(2025, 5, 28), dt.date(2025, 6, 3))
    check(run(APP / "logs", "2025-05-28", "2025-06-03"), want)


def test_single_days():
    for day in (dt.date(2025, 5, 12), dt.date(2025, 6, 1), dt.date(2025, 6, 19), dt.date(2025, 6, 20)):
        check(run(APP / "logs", day.isoformat(), day.isoformat()), recount(APP / "logs", day, day))


UA = '"Mozilla/5.0 (X11; Linux x86_64) Chrome/125.0"'
AWKWARD = {
    "edge-1/access.log-20250302.gz": [
        f'198.51.100.7 - - [01/Mar/2025:10:00:00 +0000] "GET /api/login?next=%2Fx HTTP/1.1" 502 10 "-" {UA} 0.1',
        f'198.51.100.7, 10.20.1.1 - - [01/Mar/2025:10:00:01 +0000] "POST /api/login HTTP/1.1" 503 10 "-" "ShopApp/4.2 (iPhone; iOS 17.5)" 9.1',
        f'198.51.100.8, 10.20.1.2, 10.30.0.9 - - [01/Mar/2025:10:00:02 +0000] "POST /api/login HTTP/2.0" 200 10 "https://shop.example/login?a=b c" "ShopApp/4.2" 0.2',
        f'- - - [01/Mar/2025:23:59:59 +0000] "GET /api/orders/123/items/9?x=1 HTTP/1.1" 504 10 "-" {UA} 30.0',
        f'203.0.113.9 - - [01/Mar/2025:11:00:00 +0000] "-" 400 0 "-" "-" 0.000',
        'garbage line without any structure',
        f'203.0.113.9 - - [28/Feb/2025:23:59:59 +0000] "GET /api/login HTTP/1.1" 500 10 "-" {UA} 0.1',
        f'203.0.113.9 - - [02/Mar/2025:00:00:01 +0000] "GET /api/login HTTP/1.1" 200 10 "-" {UA} 0.1',
    ],
    "edge-2/access.log-20250303": [
        f'198.51.100.9 - alice [02/Mar/2025:08:00:00 +0000] "GET / HTTP/1.1" 200 10 "-" {UA} 0.1',
        f'198.51.100.9 - - [02/Mar/2025:08:00:01 +0000] "GET /api/orders/0042 HTTP/1.1" 499 0 "-" {UA} 0.1',
        f'198.51.100.9, 10.20.3.4 - - [02/Mar/2025:08:00:02 +0000] "GET /api/orders/v2 HTTP/1.1" 500 0 "-" {UA} 0.1',
        f'198.51.100.9 - - [03/Mar/2025:00:00:00 +0000] "GET /api/login HTTP/1.1" 502 0 "-" {UA} 0.1',
        f'198.51.100.9 - - [01/Apr/2025:08:00:00 +0000] "GET /api/login HTTP/1.1" 502 0 "-" {UA} 0.1',
        f'198.51.100.9 - - [02/Feb/2025:08:00:00 +0000] "GET /api/login HTTP/1.1" 502 0 "-" {UA} 0.1',
    ],
    "edge-2/access.log": [
        f'198.51.100.10 - - [02/Mar/2025:09:00:00 +0000] "GET /api/orders/7 HTTP/1.1" 200 0 "-" {UA} 0.1',
    ],
}
AWKWARD_WANT = {
    "/api/login": (4, 2),
    "/api/orders/:id": (2, 0),
    "/api/orders/:id/items/:id": (1, 1),
    "/api/orders/v2": (1, 1),
    "/": (1, 0),
}


def test_awkward_lines():
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "edge logs"
        for name, lines in AWKWARD.items():
            path = logs / name
            path.parent.mkdir(parents=True, exist_ok=True)
            text = "\n".join(lines) + "\n"
            if name.endswith(".gz"):
                path.write_bytes(gzip.compress(text.encode()))
            else:
                path.write_text(text)
        assert recount(logs, dt.date(2025, 3, 1), dt.date(2025, 3, 2)) == AWKWARD_WANT
        check(run(logs, "2025-03-01", "2025-03-02"), AWKWARD_WANT)


def main():
    failed = 0
    tests = [(name, fn) for name, fn in globals().items() if name.startswith("test_")]
    for name, fn in tests:
        try:
            fn()
            print(f"ok   {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc(limit=2)
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
