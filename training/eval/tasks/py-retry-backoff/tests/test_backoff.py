import pytest

from payments.gateway import Declined, Gateway
from payments.retry import RetryError, delays, retry


class Flaky:
    def __init__(self, failures, exc=ConnectionError):
        self.failures, self.exc, self.calls = failures, exc, 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc(f"failure {self.calls}")
        return "ok"


def run(fn, **kwargs):
    slept = []
    try:
        return retry(fn, sleep=slept.append, **kwargs), slept, None
    except Exception as exc:  # noqa: BLE001
        return None, slept, exc


def test_gives_up_without_a_final_wait():
    fn = Flaky(10)
    _, slept, exc = run(fn, attempts=4)
    assert fn.calls == 4
    assert slept == [0.5, 1.0, 2.0]
    assert isinstance(exc, RetryError) and exc.attempts == 4
    assert isinstance(exc.last, ConnectionError) and str(exc.last) == "failure 4"
    assert exc.__cause__ is exc.last


def test_success_after_retries():
    fn = Flaky(2)
    value, slept, exc = run(fn, attempts=4)
    assert (value, exc, fn.calls) == ("ok", None, 3)
    assert slept == [0.5, 1.0]


def test_first_try():
    value, slept, _ = run(Flaky(0))
    assert value == "ok" and slept == []


def test_single_attempt_never_waits():
    fn = Flaky(5, TimeoutError)
    _, slept, exc = run(fn, attempts=1)
    assert fn.calls == 1 and slept == [] and isinstance(exc, RetryError) and isinstance(exc.__cause__, TimeoutError)


def test_cap():
    _, slept, _ = run(Flaky(10), attempts=6, base_delay=1.0, max_delay=3.0)
    assert slept == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_other_errors_are_not_retried():
    fn = Flaky(3, KeyError)
    _, slept, exc = run(fn, attempts=4)
    assert isinstance(exc, KeyError) and fn.calls == 1 and slept == []


def test_attempts_must_be_positive():
    with pytest.raises(ValueError):
        retry(lambda: 1, attempts=0, sleep=lambda s: None)


@pytest.mark.parametrize(
    ("attempts", "base", "cap", "expected"),
    [(1, 0.5, 8.0, []), (2, 0.5, 8.0, [0.5]), (4, 0.5, 8.0, [0.5, 1.0, 2.0]), (7, 0.5, 8.0, [0.5, 1.0, 2.0, 4.0, 8.0, 8.0])],
)
def test_delays_are_the_waits_between_attempts(attempts, base, cap, expected):
    assert delays(attempts, base, cap) == expected


class Down:
    def __init__(self):
        self.posts = 0

    def post(self, path, body):
        self.posts += 1
        raise ConnectionError("gateway unreachable")


class Declining:
    def __init__(self):
        self.posts = 0

    def post(self, path, body):
        self.posts += 1
        return {"status": "declined", "reason": "insufficient funds"}


def test_charge_when_the_gateway_is_down():
    slept, transport = [], Down()
    with pytest.raises(RetryError):
        Gateway(transport).charge("cus_1", 500, sleep=slept.append)
    assert transport.posts == 4 and sum(slept) == 3.5


def test_declined_is_not_retried():
    slept, transport = [], Declining()
    with pytest.raises(Declined):
        Gateway(transport).charge("cus_1", 500, sleep=slept.append)
    assert transport.posts == 1 and slept == []
