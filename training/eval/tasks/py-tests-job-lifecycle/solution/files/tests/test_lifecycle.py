import pytest

from taskq.lifecycle import FINAL, InvalidTransition, Job, replay


def test_new_job():
    job = Job("j1")
    assert (job.state, job.attempts, job.max_attempts, job.error, job.history) == ("queued", 0, 3, None, [])
    assert job.attempts_left == 3 and not job.final


@pytest.mark.parametrize("max_attempts", [0, -1])
def test_max_attempts_must_be_positive(max_attempts):
    with pytest.raises(ValueError):
        Job("j", max_attempts=max_attempts)


def test_one_attempt_is_allowed():
    assert Job("j", max_attempts=1).attempts_left == 1


def test_happy_path():
    job = Job("j")
    job.start()
    assert job.state == "running" and job.attempts == 1 and job.attempts_left == 2
    job.succeed()
    assert job.state == "succeeded" and job.final
    assert job.history == [("queued", "running"), ("running", "succeeded")]


def test_failure_with_attempts_left_requeues():
    job = Job("j", max_attempts=2)
    job.start()
    job.fail("boom")
    assert job.state == "queued" and job.error == "boom" and not job.final
    assert job.attempts == 1 and job.attempts_left == 1
    assert job.history == [("queued", "running"), ("running", "failed"), ("failed", "queued")]


def test_last_failure_is_dead():
    job = Job("j", max_attempts=2)
    for n in range(2):
        job.start()
        job.fail(f"boom {n}")
    assert job.state == "dead" and job.final and job.attempts == 2 and job.attempts_left == 0
    assert job.error == "boom 1"
    assert job.history[-2:] == [("running", "failed"), ("failed", "dead")]
    with pytest.raises(InvalidTransition):
        job.start()


def test_single_attempt_job_dies_at_once():
    job = Job("j", max_attempts=1)
    job.start()
    job.fail("x")
    assert job.state == "dead"


def test_success_after_retry_clears_error():
    job = Job("j")
    job.start()
    job.fail("flaky")
    job.start()
    job.succeed()
    assert job.state == "succeeded" and job.error is None and job.attempts == 2


@pytest.mark.parametrize("setup", [[], ["start"]])
def test_cancel_from_queued_or_running(setup):
    job = replay("j", setup)
    before = job.state
    job.cancel()
    assert job.state == "cancelled" and job.final and job.history[-1] == (before, "cancelled")


@pytest.mark.parametrize(
    ("events", "action"),
    [
        ([], "succeed"),
        ([], "fail"),
        (["start"], "start"),
        (["start", "succeed"], "start"),
        (["start", "succeed"], "cancel"),
        (["start", "succeed"], "fail"),
        (["cancel"], "start"),
        (["cancel"], "cancel"),
        (["start", "fail:a", "start", "fail:b", "start", "fail:c"], "cancel"),
    ],
)
def test_invalid_transitions(events, action):
    job = replay("j", events)
    state, history, attempts = job.state, list(job.history), job.attempts
    with pytest.raises(InvalidTransition) as info:
        getattr(job, action)(*(["e"] if action == "fail" else []))
    assert info.value.current == state
    assert job.state == state and job.history == history and job.attempts == attempts


def test_invalid_transition_message():
    job = Job("j9")
    with pytest.raises(InvalidTransition, match="j9"):
        job.succeed()


def test_final_states():
    assert FINAL == {"succeeded", "dead", "cancelled"}


def test_replay():
    job = replay("r", ["start", "fail:timeout: db", "start", "succeed"])
    assert job.state == "succeeded" and job.attempts == 2 and job.error is None


def test_replay_keeps_colons_in_errors():
    job = replay("r", ["start", "fail:OSError: disk full: /var"])
    assert job.error == "OSError: disk full: /var"


def test_replay_honours_max_attempts():
    assert replay("r", ["start", "fail:x"], max_attempts=1).state == "dead"
    assert replay("r", ["start", "fail:x"], max_attempts=2).state == "queued"


def test_replay_rejects_unknown_events():
    with pytest.raises(ValueError):
        replay("r", ["start", "explode"])
