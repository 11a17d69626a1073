"""Every test runs with its own HOME, XDG folders and no OPENCOMPOSER_* variables, so the
developer's real config, data and environment can never leak in or be written to. The fake
OpenAI-compatible upstream is a fixture here, for the backend's, the server's and the agent's
tests alike.

Without a GPU the Triton kernels run under Triton's interpreter. TRITON_INTERPRET must be set
before triton is first imported, and torch._dynamo imports it (transformers imports dynamo), so
a test module anywhere in the suite may import it during collection: only this root conftest,
loaded before any test module in every xdist worker, is early enough."""

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch
from support.fake_openai import FakeOpenAI

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
