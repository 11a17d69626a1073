from datetime import datetime

from jobsched.cron import next_run


def test_daily():
    assert next_run("15 2 * * *", datetime(2026, 3, 1, 12, 0)) == datetime(2026, 3, 2, 2, 15)
