"""Real folders and git repositories of real code for the data stages' tests, and one torch
thread per test (the machine's cores are shared with the other test worker)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from support.corpus_repos import MIT, git_repo

from opencomposer.serving.model_recipes.tiny_moe import corpus_texts


@pytest.fixture(scope="session")
def code_texts() -> list[str]:
    """Distinct real Python files (the seeded tokenizer's snapshot), longest first."""
    return sorted(corpus_texts(), key=len, reverse=True)


@pytest.fixture
def code_repos(tmp_path: Path, code_texts: list[str]) -> list[Path]:
    """Eight MIT repositories of real code, 15 files each."""
    repos = []
    for index in range(8):
        texts = code_texts[index * 15 : (index + 1) * 15]
        files: dict[str, str | bytes] = {"LICENSE": MIT}
        files |= {f"pkg/mod_{n}.py": text for n, text in enumerate(texts)}
        repos.append(git_repo(tmp_path / "src" / f"repo{index}", files))
    return repos


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
