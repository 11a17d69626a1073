"""Every test runs with its own HOME, XDG folders and no OPENCOMPOSER_* variables, so the
developer's real config, data and environment can never leak in or be written to. The fake
OpenAI-compatible upstream is a fixture here, for the backend's, the server's and the agent's
tests alike."""

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch
from support.fake_openai import FakeOpenAI

# Triton reads TRITON_INTERPRET once, when it is first imported (its own helpers such as
# tl.zeros are decorated then), and transformers imports triton: so the switch that runs the
# Triton kernels' tests on CPU must be set here, before any test module is collected.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for name in list(os.environ):
        if name.startswith("OPENCOMPOSER_"):
            monkeypatch.delenv(name)
    return home


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    """A fake OpenAI-compatible upstream on a loopback port (tests/support/fake_openai.py)."""
    server = FakeOpenAI()
    await server.start()
    yield server
    await server.stop()
