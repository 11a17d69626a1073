"""The answer in /app/answer.txt against a recount from the logs."""

import collections
import gzip
import re
import sys
from pathlib import Path

APP = Path("/app")
FAILED = re.compile(
    r"^(\w{3}) +\d+ \d\d:\d\d:\d\d (\S+) sshd\[\d+\]: (?:message repeated \d+ times: \[ )?"
    r"Failed password for .* from (\S+) port \d+"
)


def expected():
    hosts = collections.defaultdict(set)
    files = sorted((APP / "logs").glob("*/auth.log*"))
    assert len(files) >= 300, f"only {len(files)} log files"
    for f in files:
        opener = gzip.open if f.name.endswith(".gz") else open
        with opener(f, "rt", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = FAILED.match(line)
                if m and m[1] == "Oct" and not m[3].startswith("10."):
                    hosts[m[3]].add(m[2])
    return sum(1 for seen in hosts.values() if len(seen) >= 3)


def main():
    want = expected()
    assert want > 20, want
    path = APP / "answer.txt"
    if not path.is_file():
        print("FAIL: no answer.txt")
        return 1
    text = path.read_text().strip()
    if not re.fullmatch(r"\d+", text):
        print(f"FAIL: answer.txt should hold just a number, not {text[:200]!r}")
        return 1
    if int(text) != want:
        print(f"FAIL: answer.txt says {text}; the logs give a different count")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
