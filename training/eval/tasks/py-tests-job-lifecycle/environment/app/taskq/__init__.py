"""A tiny job queue: jobs, their lifecycle, and a worker loop."""

from taskq.lifecycle import FINAL, InvalidTransition, Job, replay
from taskq.queue import JobQueue

__all__ = ["FINAL", "InvalidTransition", "Job", "JobQueue", "replay"]
