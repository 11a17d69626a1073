from taskq import Job, JobQueue


def test_runs_a_job():
    q = JobQueue()
    q.submit(Job("a"))
    assert q.run_next(lambda job: None).state == "succeeded"
