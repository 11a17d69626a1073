"""A workspace folder and a tool harness over it, its data kept apart from the tree."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
async def harness(root: Path, tmp_path: Path) -> AsyncIterator[ToolHarness]:
    tools = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data")
    yield tools
    await tools.close()
