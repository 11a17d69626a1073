"""Fixtures of the HTTP tests."""

from pathlib import Path

import pytest

from opencomposer.serving.model_store import init


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small workspace with two Python files (what a glob in a scripted turn finds)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("print('hi')\n")
    (root / "util.py").write_text("X = 1\n")
    return root


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder holding the real tiny model (random weights, real tokenizer)."""
    directory = tmp_path_factory.mktemp("models")
    init("tiny-moe", directory)
    return directory
