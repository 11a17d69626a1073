"""Fixtures of the HTTP tests."""

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small workspace with two Python files (what a glob in a scripted turn finds)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("print('hi')\n")
    (root / "util.py").write_text("X = 1\n")
    return root
