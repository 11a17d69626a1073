"""Requests slower than a threshold in one log file: `python3 tools/slow_requests.py logs/api.log 500`."""

import re
import sys

LINE = re.compile(r"^(\S+) INFO request method=(\S+) path=(\S+) status=(\d+) duration=([\d.]+)s")


def slow(path: str, threshold_ms: float):
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m and float(m.group(5)) * 1000 > threshold_ms:
                yield m.group(1), m.group(2), m.group(3), float(m.group(5)) * 1000


if __name__ == "__main__":
    for stamp, method, path, ms in slow(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 500):
        print(f"{stamp} {method} {path} {ms:.1f} ms")
