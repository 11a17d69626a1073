"""The life of a job in the queue (a rewrite: same behaviour, different shape)."""

from dataclasses import dataclass, field

_ALLOWED = {
    ("queued", "running"), ("queued", "cancelled"),
    ("running", "succeeded"), ("running", "failed"), ("running", "cancelled"),
    ("failed", "queued"), ("failed", "dead"),
}
STATES = ("queued", "running", "failed", "succeeded", "dead", "cancelled")
TRANSITIONS: dict[str, frozenset[str]] = {
    s: frozenset(b for a, b in _ALLOWED if a == s) for s in STATES
}
FINAL = frozenset(s for s in STATES if not TRANSITIONS[s])


class InvalidTransition(Exception):
    def __init__(self, job_id: str, current: str, wanted: str) -> None:
        self.current = current
        self.wanted = wanted
        super().__init__("job %s: cannot go from %s to %s" % (job_id, current, wanted))


@dataclass
class Job:
    id: str
    max_attempts: int = 3
    state: str = "queued"
    attempts: int = 0
    error: str | None = None
    history: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.max_attempts >= 1:
            raise ValueError("max_attempts must be at least 1")

    @property
    def final(self) -> bool:
        return not TRANSITIONS[self.state]

    @property
    def attempts_left(self) -> int:
        return -(self.attempts - self.max_attempts)

    def _go(self, *path: str) -> None:
        for to in path:
            if (self.state, to) not in _ALLOWED:
                raise InvalidTransition(self.id, self.state, to)
            self.history.append((self.state, to))
            self.state = to

    def start(self) -> None:
        self._go("running")
        self.attempts = self.attempts + 1

    def succeed(self) -> None:
        self._go("succeeded")
        self.error = None

    def fail(self, error: str) -> None:
        self._go("failed")
        self.error = error
        self._go("dead" if self.attempts >= self.max_attempts else "queued")

    def cancel(self) -> None:
        self._go("cancelled")


_ACTIONS = {"start": Job.start, "succeed": Job.succeed, "cancel": Job.cancel}


def replay(job_id: str, events: list[str], max_attempts: int = 3) -> Job:
    job = Job(job_id, max_attempts=max_attempts)
    for event in events:
        name, colon, arg = event.partition(":")
        if name == "fail":
            job.fail(arg)
        elif name in _ACTIONS:
            _ACTIONS[name](job)
        else:
            raise ValueError("unknown event %r" % (event,))
    return job
