"""A runtime over a real temporary git repository, a real trace store and the scripted engine."""

import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from support.scripted_engine import Reply, ScriptedEngine

from opencomposer.agent.protocol.items import TextInput
from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings

CALC = """def add(a, b):
    return a - b
"""
TEST_CALC = """from calc import add


def test_add():
    assert add(2, 3) == 5
"""


def text(value: str) -> list[TextInput]:
    return [TextInput(text=value)]


def make_repo(root: Path) -> Path:
    """A git repository at `root` with calc.py (its bug) and its test committed."""
    root.mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "test_calc.py").write_text(TEST_CALC)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def settings(tmp_path: Path) -> Callable[..., Settings]:
    def make(**agent: Any) -> Settings:
        return Settings(
            home=tmp_path / "home",
            models_dir=tmp_path / "models",
            agent={"max_wall_time": 60, **agent},
        )

    return make


@pytest.fixture
async def make_runtime(
    settings: Callable[..., Settings],
) -> AsyncIterator[Callable[..., AgentRuntime]]:
    made: list[AgentRuntime] = []

    def make(replies: list[Reply] | ScriptedEngine, **agent: Any) -> AgentRuntime:
        engine = replies if isinstance(replies, ScriptedEngine) else ScriptedEngine(replies)
        runtime = AgentRuntime(settings(**agent), engine)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()
