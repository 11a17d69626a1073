"""Fixtures every sandbox test needs: the bubblewrap binary (or a clean skip where it cannot
start a sandbox), a folder outside both the workspace and the sandbox's private /tmp, and a
way to find a test's processes. Imported by the conftest files that use them."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from opencomposer.agent.tools.sandbox import (
    BubblewrapSandbox,
    default_masked_paths,
    probe_bubblewrap,
)
from opencomposer.config import SandboxSettings
from opencomposer.paths import find_program


@pytest.fixture(scope="session")
def bwrap() -> Path:
    works, detail = probe_bubblewrap()
    path = find_program("bwrap")
    if not works or path is None:
        pytest.skip(f"bubblewrap cannot start a sandbox here: {detail}")
    return path


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder the host can write and a sandboxed command cannot see into as its own
    (/tmp is private inside the sandbox, /var/tmp is not)."""
    if not os.access("/var/tmp", os.W_OK):
        pytest.skip("/var/tmp is not writable")
    folder = Path(tempfile.mkdtemp(prefix="opencomposer-test-", dir="/var/tmp")).resolve()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def sandbox_over(bwrap: Path, workspace: Path, data: Path, **settings: object) -> BubblewrapSandbox:
    """The harness's sandbox for `workspace`, with opencomposer's data folder at `data` and the
    user's credential stores masked, under `settings`."""
    return BubblewrapSandbox(
        workspace,
        bwrap,
        default_masked_paths(Path.home(), data),
        SandboxSettings(**settings),  # type: ignore[arg-type]
        quarantine=data / "quarantine",
    )


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line mentions `marker` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
