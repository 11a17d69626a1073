"""`opencomposer train mtp` end to end in its own process: a tiny Llama with a tokenizer, a
folder of Python files, a few steps; the folder it writes serves with MTP on."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.llama_mtp import write_llama_checkpoint

from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.model_recipes.tiny_moe import train_tokenizer

pytest.importorskip("transformers")

CLI = str(Path(sys.executable).parent / "opencomposer")
SOURCES = Path(__file__).parents[3] / "serving" / "engines" / "embedded"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # A narrow terminal: paths are printed whole, never broken across lines.
    env = {**os.environ, "COLUMNS": "40"}
    return subprocess.run(
        [CLI, "train", "mtp", *args], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.fixture
def model(tmp_path: Path) -> Path:
    files = sorted(SOURCES.glob("*.py"))
    tokenizer = train_tokenizer([f.read_text() for f in files], vocab_size=400)
    write_llama_checkpoint(tmp_path / "model", mtp=False, vocab_size=512)
    tokenizer.save(str(tmp_path / "model" / "tokenizer.json"))
    data = tmp_path / "data"
    data.mkdir()
    for file in files:
        shutil.copy(file, data / file.name)
    return tmp_path / "model"


def test_trains_and_writes_a_servable_folder(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run(
        *("--model", str(model), "--data", str(tmp_path / "data"), "--out", str(out)),
        *("--steps", "3", "--seq-len", "64", "--batch-rows", "2", "--eval-percent", "40"),
        *("--eval-rows", "2", "--eval-tokens", "8", "--threads", "1"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "held-out acceptance length before: k=1 " in proc.stdout
    assert "held-out acceptance length after: k=1 " in proc.stdout
    assert f"wrote {out / 'mtp.safetensors'} (" in proc.stdout
    assert (out / "tokenizer.json").is_file()
    summary = json.loads((out / "mtp-training.json").read_text())
    assert summary["steps_run"] == 3
    assert load_model(out).num_mtp_layers == 1


def test_a_draft_vocabulary_is_written_and_measured(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run(
        *("--model", str(model), "--data", str(tmp_path / "data"), "--out", str(out)),
        *("--steps", "2", "--seq-len", "64", "--batch-rows", "2", "--eval-percent", "40"),
        *("--eval-rows", "2", "--eval-tokens", "8", "--draft-vocab", "64"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "drafts from the 64-token draft vocabulary (" in proc.stdout
    served = load_model(out)
    assert served.draft_token_ids is not None and len(served.draft_token_ids) == 64
    summary = json.loads((out / "mtp-training.json").read_text())
    assert set(summary["accept_length_after"]) == {"1", "2", "3"}
    assert 0 < summary["draft_vocab_coverage"] <= 1


def test_bad_input_is_one_line(model: Path, tmp_path: Path) -> None:
    proc = run("--model", str(model), "--data", str(tmp_path / "absent"), "--out", str(tmp_path))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines()[-1]
        == f"opencomposer: --data: no folder {tmp_path / 'absent'}"
    )
    (model / "tokenizer.json").unlink()
    proc = run("--model", str(model), "--data", str(tmp_path / "data"), "--out", str(tmp_path))
    assert proc.returncode == 2 and "no tokenizer.json" in proc.stderr
    assert "Traceback" not in proc.stderr
