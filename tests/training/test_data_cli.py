"""`opencomposer train data` and `train tokenizer` as users run them: a real process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

CLI = str(Path(sys.executable).parent / "opencomposer")


def run(*args: str, rc: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [CLI, "train", *args], capture_output=True, text=True, timeout=120, env={**os.environ}
    )
    assert proc.returncode == rc, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def test_data_then_tokenizer_end_to_end(tmp_path: Path, code_repos: list[Path]):
    data = tmp_path / "data"
    done = run("data", *map(str, code_repos), "--out", str(data), "--val-fraction", "0.3")
    manifest = json.loads((data / "manifest.json").read_text())
    assert f"kept {manifest['kept']} of {manifest['seen']} files" in done.stdout
    assert manifest["kept"] == 8 * 15
    assert manifest["splits"]["val"]["files"] > 0
    done = run("tokenizer", "--data", str(data), "--vocab-size", "1024", "--fim-rate", "0.25")
    assert "vocabulary 1024" in done.stdout
    assert (data / "tokenizer" / "tokenizer.json").is_file()
    for split in ("train", "val"):
        meta = json.loads((data / "tokens" / split / "meta.json").read_text())
        assert meta["fim_rate"] == 0.25
        tokens = np.memmap(data / "tokens" / split / "tokens.bin", dtype=np.uint32, mode="r")
        assert len(tokens) == meta["tokens"] > 0


def test_clear_errors(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    failed = run("data", str(empty), "--out", str(tmp_path / "out"), rc=2)
    assert failed.stderr.startswith("opencomposer: the corpus is empty")
    assert len(failed.stderr.splitlines()) == 1
    failed = run("tokenizer", "--data", str(tmp_path / "missing"), rc=2)
    missing = tmp_path / "missing"
    assert failed.stderr == (
        f"opencomposer: no corpus in {missing}: run `opencomposer train data --out DIR`\n"
    )


def test_cli_budget_defaults_are_the_library_defaults():
    import inspect

    from opencomposer.serving.cli.train_cmd import data
    from opencomposer.training.corpus import Budget

    defaults = {n: p.default for n, p in inspect.signature(data).parameters.items()}
    budget = Budget()
    assert defaults["max_files"] == budget.max_files
    assert defaults["max_mb"] * 2**20 == budget.max_bytes
    assert defaults["max_repo_mb"] * 2**20 == budget.max_repo_bytes
    assert defaults["max_file_kb"] * 2**10 == budget.max_file_bytes
