"""The life of a job in the queue.

    queued --start--> running --succeed--> succeeded
                         |
                         +--fail--> failed --(attempts left)--> queued
                         |                 --(none left)------> dead
    queued, running --cancel--> cancelled

succeeded, dead and cancelled are final. A job may be started `max_attempts` times in all;
a failure with attempts left puts it straight back in the queue. Every state change is
recorded in `history` as a (from, to) pair, the automatic ones included.
"""

from dataclasses import dataclass, field

TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "cancelled"}),
    "running": frozenset({"succeeded", "failed", "cancelled"}),
    "failed": frozenset({"queued", "dead"}),
    "succeeded": frozenset(),
    "dead": frozenset(),
    "cancelled": frozenset(),
}
FINAL = frozenset({"succeeded", "dead", "cancelled"})


class InvalidTransition(Exception):
    """A state change the lifecycle does not allow."""

    def __init__(self, job_id: str, current: str, wanted: str) -> None:
        super().__init__(f"job {job_id}: cannot go from {current} to {wanted}")
        self.current, self.wanted = current, wanted


@dataclass
class Job:
    id: str
    max_attempts: int = 3
    state: str = "queued"
    attempts: int = 0
    error: str | None = None
    history: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.max_attempts < 0:
            raise ValueError("max_attempts must be at least 1")

    @property
    def final(self) -> bool:
        return self.state in FINAL

    @property
    def attempts_left(self) -> int:
        return self.max_attempts - self.attempts

    def _move(self, to: str) -> None:
        if to not in TRANSITIONS[self.state]:
            raise InvalidTransition(self.id, self.state, to)
        self.history.append((self.state, to))
        self.state = to

    def start(self) -> None:
        self._move("running")
        self.attempts += 1

    def succeed(self) -> None:
        self._move("succeeded")
        self.error = None

    def fail(self, error: str) -> None:
        self._move("failed")
        self.error = error
        if self.attempts < self.max_attempts:
            self._move("queued")
        else:
            self._move("dead")

    def cancel(self) -> None:
        self._move("cancelled")


def replay(job_id: str, events: list[str], max_attempts: int = 3) -> Job:
    """The job that results from `events`: "start", "succeed", "cancel" or "fail:<error>"
    (the error may itself contain colons). ValueError for an event it does not know."""
    job = Job(job_id, max_attempts)
    for event in events:
        name, _, arg = event.partition(":")
        if name == "start":
            job.start()
        elif name == "succeed":
            job.succeed()
        elif name == "cancel":
            job.cancel()
        elif name == "fail":
            job.fail(arg)
        else:
            raise ValueError(f"unknown event {event!r}")
    return job
