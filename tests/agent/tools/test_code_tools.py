"""symbols and semantic_search through the harness."""

from pathlib import Path

import pytest

from opencomposer.agent.tools import code_tools
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.indexes import STILL_BUILDING
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings

SOURCE = '''class Config:
    """Settings loaded from disk."""

    def load(self, path):
        return open(path).read()


def parse_retry_delay(attempt):
    """Exponential backoff in seconds."""
    return min(2 ** attempt, 60)
'''


@pytest.fixture
def project(root: Path) -> Path:
    (root / "app").mkdir()
    (root / "app/config.py").write_text(SOURCE)
    (root / "app/server.go").write_text(
        "package app\n\nfunc StartServer() error {\n\treturn nil\n}\n"
    )
    (root / "README.md").write_text("# Demo\n\nA demo project.\n")
    return root


async def test_outline_of_a_file(harness, project):
    outcome = await harness.call("symbols", {"path": "app/config.py"})
    assert outcome.text == (
        "app/config.py:\n"
        "1-5 class Config: class Config:\n"
        "  4-5 method load: def load(self, path):\n"
        "8-10 function parse_retry_delay: def parse_retry_delay(attempt):"
    )


async def test_query_across_the_workspace(harness, project):
    outcome = await harness.call("symbols", {"query": "StartServer"})
    assert outcome.text == "app/server.go:3 function StartServer: func StartServer() error {"
    initials = await harness.call("symbols", {"query": "prd"})
    assert initials.text.startswith("app/config.py:8 function parse_retry_delay")
    nothing = await harness.call("symbols", {"query": "zzz"})
    assert nothing.text == "No definitions match 'zzz'."


async def test_symbols_argument_errors(harness, project):
    neither = await harness.call("symbols", {})
    assert neither.error.kind == "invalid_arguments"
    unsupported = await harness.call("symbols", {"path": "README.md"})
    assert unsupported.error.kind == "invalid_arguments"


async def test_semantic_search_without_a_model_says_it_used_keywords(harness, project):
    outcome = await harness.call("semantic_search", {"query": "retry delay backoff"})
    assert outcome.ok and outcome.fields["method"] == "lexical"
    assert outcome.text.startswith("[lexical search: embedding model not installed")
    assert "app/config.py:" in outcome.text.splitlines()[2]


async def test_semantic_search_with_the_model(root: Path, project, tmp_path: Path, models_dir):
    harness = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data", models_dir=models_dir)
    outcome = await harness.call(
        "semantic_search", {"query": "how long to wait before trying again", "top_k": 2}
    )
    assert outcome.fields["method"] == "semantic"
    assert outcome.text.splitlines()[0] == "[semantic search]"
    assert outcome.text.splitlines()[2].startswith("app/config.py:8-10 parse_retry_delay")
    await harness.close()


async def test_a_search_that_would_wait_for_embedding_gets_keywords_meanwhile(
    root: Path, project, tmp_path: Path, models_dir, monkeypatch
):
    monkeypatch.setattr(code_tools, "SEMANTIC_WAIT", 0.0)
    harness = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data", models_dir=models_dir)
    first = await harness.call("semantic_search", {"query": "retry delay"})
    assert first.fields["method"] == "lexical"
    assert first.text.startswith(f"[lexical search: {STILL_BUILDING}]")
    monkeypatch.setattr(code_tools, "SEMANTIC_WAIT", 60.0)
    later = await harness.call("semantic_search", {"query": "retry delay"})
    assert later.fields["method"] == "semantic"
    await harness.close()
