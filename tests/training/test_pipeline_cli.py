"""The whole first phase as a user runs it, in real processes: `train data`, `train
tokenizer`, `train pretrain` (a short stage, a YaRN stage, the MTP layer trained jointly),
then the engine serving the checkpoint, with MTP drafts and without, token for token."""

import json
import subprocess
import sys
from pathlib import Path

from support.llama_mtp import write_llama_checkpoint
from support.pretrain_fixtures import write_model

from opencomposer.serving.model_recipes.tiny_moe import train_tokenizer

CLI = str(Path(sys.executable).parent / "opencomposer")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def test_data_to_tokenizer_to_pretraining_to_the_engine(tmp_path: Path, code_repos: list[Path]):
    data, out = tmp_path / "data", tmp_path / "run"
    run("train", "data", *map(str, code_repos), "--out", str(data), "--val-fraction", "0.3")
    run("train", "tokenizer", "--data", str(data), "--vocab-size", "1024")
    init = write_model(tmp_path / "init", vocab_size=1024)
    run(
        "train", "pretrain", "--data", str(data), "--out", str(out), "--init", str(init),
        "--steps", "3", "--seq-len", "32", "--long-steps", "1", "--long-seq-len", "64",
        "--batch-rows", "2", "--warmup", "1", "--val-every", "2", "--threads", "1",
    )  # fmt: skip
    checkpoint = out / "checkpoint-4"
    assert (out / "latest").read_text() == "checkpoint-4\n"
    assert (checkpoint / "tokenizer.json").read_bytes() == (
        data / "tokenizer" / "tokenizer.json"
    ).read_bytes()
    entries = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [e for e in entries if "loss" in e]
    assert [e["stage"] for e in steps] == ["short"] * 3 + ["long"]
    assert all(e["extra_loss"] > 0 for e in steps)  # the MTP layer's KL, trained jointly
    assert any("val_loss" in e for e in entries)
    assert json.loads((checkpoint / "config.json").read_text())["rope_scaling"]["type"] == "yarn"

    def generate(spec: str) -> str:
        return run(
            "engine", "generate", "def parse(", "--engine", f"embedded:{checkpoint}",
            "--spec", spec, "--draft-tokens", "2", "--max-tokens", "12", "--temperature", "0",
        ).stdout  # fmt: skip

    text = generate("none")
    assert text and generate("mtp") == text


def test_data_to_regenerated_answers_to_an_mtp_head_to_the_engine(
    tmp_path: Path, code_repos: list[Path], code_texts: list[str]
):
    """The draft-head recipe: the model's own answers to corpus prompts, a head trained on them
    with the trunk frozen, served with MTP on and giving what plain decoding gives."""
    data, regen, head, model = (tmp_path / n for n in ("data", "regen", "head", "model"))
    run("train", "data", *map(str, code_repos), "--out", str(data), "--val-fraction", "0.3")
    write_llama_checkpoint(model, mtp=False, vocab_size=512)
    train_tokenizer(code_texts[:40], vocab_size=400).save(str(model / "tokenizer.json"))
    made = run(
        "train", "regenerate", "--model", str(model), "--data", str(data), "--out", str(regen),
        "--count", "12", "--max-tokens", "16", "--batch", "4", "--threads", "1",
    )  # fmt: skip
    assert "wrote 12 samples (" in made.stdout and len(list(regen.glob("*.txt"))) == 12
    trained = run(
        "train", "mtp", "--model", str(model), "--data", str(regen), "--out", str(head),
        "--steps", "3", "--seq-len", "64", "--batch-rows", "2", "--eval-percent", "30",
        "--eval-rows", "2", "--eval-tokens", "8", "--threads", "1", "--draft-vocab", "64",
    )  # fmt: skip
    # Into a log, not a terminal: the steps still show, as plain lines.
    logged = [line for line in trained.stderr.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in logged] == ["1/3", "2/3", "3/3"]

    def generate(spec: str) -> str:
        return run(
            "engine", "generate", "def parse(", "--engine", f"embedded:{head}",
            "--spec", spec, "--max-tokens", "12", "--temperature", "0",
        ).stdout  # fmt: skip

    text = generate("none")
    assert text and generate("mtp") == text


def test_regenerate_without_a_corpus_is_one_line(tmp_path: Path):
    proc = subprocess.run(
        [CLI, "train", "regenerate", "--model", "smollm2-135m", "--data", str(tmp_path),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"opencomposer: {tmp_path} holds no corpus: run `opencomposer train data` first"
    ]
