"""The job table and `python3 -m jobsched.jobs list`."""

import sys
from dataclasses import dataclass
from datetime import datetime

from jobsched.cron import next_run
from jobsched.describe import describe


@dataclass(frozen=True)
class Job:
    name: str
    schedule: str
    command: str


JOBS = [
    Job("weekly-report", "0 9 * * 1", "reports weekly --email"),
    Job("payroll", "0 6 25 * *", "payroll run"),
    Job("backups", "15 2 * * *", "backup --all"),
    Job("friday-deploy-freeze", "0 15 * * FRI", "freeze on"),
    Job("quarterly-close", "0 0 1 JAN,APR,JUL,OCT *", "finance close"),
]


def listing(now: datetime) -> list[str]:
    return [f"{j.name:<22} {describe(j.schedule):<40} next {next_run(j.schedule, now):%a %Y-%m-%d %H:%M}" for j in JOBS]


if __name__ == "__main__":
    print("\n".join(listing(datetime.now())))
    sys.exit(0)
