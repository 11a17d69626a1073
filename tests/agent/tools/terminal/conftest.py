"""Job managers over the real sandboxes of tests/agent/tools/conftest.py."""

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from opencomposer.agent.tools.sandbox import Sandbox
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.agent.tools.terminal.jobs import JobManager
from opencomposer.redact import Redactor


@pytest.fixture
async def make_jobs(sandbox: Sandbox, workspace: Path) -> AsyncIterator[Callable[..., JobManager]]:
    """make_jobs(base_env=None, secrets=(), **options) -> a JobManager, closed after the test."""
    managers: list[JobManager] = []

    def make(
        base_env: dict[str, str] | None = None, secrets: tuple[str, ...] = (), **options: object
    ) -> JobManager:
        env, removed = scrub_environment(base_env if base_env is not None else os.environ)
        manager = JobManager(sandbox, workspace, env, Redactor([*removed, *secrets]), **options)
        managers.append(manager)
        return manager

    yield make
    for manager in managers:
        await manager.close()
