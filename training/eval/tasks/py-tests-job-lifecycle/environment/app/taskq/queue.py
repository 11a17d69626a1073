"""An in-memory queue of jobs, first in first out."""

from collections import deque
from collections.abc import Callable

from taskq.lifecycle import Job


class JobQueue:
    def __init__(self) -> None:
        self._waiting: deque[Job] = deque()
        self.jobs: dict[str, Job] = {}

    def submit(self, job: Job) -> None:
        if job.id in self.jobs:
            raise KeyError(f"job {job.id} already submitted")
        self.jobs[job.id] = job
        self._waiting.append(job)

    def run_next(self, work: Callable[[Job], None]) -> Job | None:
        """Runs the next waiting job; a job that fails with attempts left goes to the back."""
        while self._waiting:
            job = self._waiting.popleft()
            if job.state != "queued":
                continue  # cancelled while waiting
            job.start()
            try:
                work(job)
            except Exception as exc:  # noqa: BLE001 - the job's failure, not ours
                job.fail(f"{type(exc).__name__}: {exc}")
                if job.state == "queued":
                    self._waiting.append(job)
            else:
                job.succeed()
            return job
        return None
