"""`opencomposer engine logits` and `engine bench` as users run them: a real process on a
tiny-moe created in a scratch models folder (figures are not asserted: machines are noisy)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from opencomposer.serving import model_store
from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.loader import load_model

CLI = str(Path(sys.executable).parent / "opencomposer")
IDS = [5, 17, 300, 42, 9, 4000]
VOCAB = 4096
# The CLI computes in another process with the same kernels; a different thread split may
# still reorder float sums, so not bit-exact.
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def run(*args: str, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [CLI, *args], capture_output=True, text=True, timeout=300, env={**os.environ}
    )
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    model_store.init("tiny-moe", folder)
    return folder


@torch.inference_mode()
def in_process(folder: Path, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Logits and MTP logits of one full forward, straight through the model."""
    model = load_model(folder)
    model.allocate_kv_cache(len(ids))
    tokens = torch.tensor(ids)
    hidden = model(tokens, ForwardContext.contiguous([len(ids)]))
    mtp = model.mtp_forward(tokens[1:], hidden[:-1], ForwardContext.contiguous([len(ids) - 1]))
    return model.compute_logits(hidden).numpy(), model.compute_logits(mtp).numpy()


def test_logits_equal_an_in_process_forward(models_dir: Path, tmp_path: Path):
    target = tmp_path / "logits.npy"
    proc = run(
        "engine",
        "logits",
        "-c",
        f"models_dir={models_dir}",
        "--model",
        "tiny-moe",
        "--tokens",
        ",".join(map(str, IDS)),
        "--out",
        str(target),
    )
    written = np.load(target)
    assert proc.stdout.splitlines() == [
        f"logits: float32 [{len(IDS)}, {VOCAB}] -> {target}",
        f"last-row argmax: {int(written[-1].argmax())}",
    ]
    assert written.dtype == np.float32
    expected, _ = in_process(models_dir / "tiny-moe", IDS)
    np.testing.assert_allclose(written, expected, **TOLERANCE)
    # Without --mtp no second file, and no temporary file is left behind.
    assert [p.name for p in tmp_path.iterdir()] == ["logits.npy"]


def test_mtp_logits_go_to_a_second_file(models_dir: Path, tmp_path: Path):
    folder = models_dir / "tiny-moe"
    proc = run(
        "engine",
        "logits",
        "--model",
        str(folder),
        "--tokens",
        ",".join(map(str, IDS)),
        "--out",
        str(tmp_path / "x.npy"),
        "--mtp",
    )
    assert proc.stdout.splitlines()[-1] == (
        f"MTP logits: float32 [{len(IDS) - 1}, {VOCAB}] -> {tmp_path / 'x.mtp.npy'}"
    )
    expected, expected_mtp = in_process(folder, IDS)
    np.testing.assert_allclose(np.load(tmp_path / "x.npy"), expected, **TOLERANCE)
    mtp = np.load(tmp_path / "x.mtp.npy")
    assert (mtp.dtype, mtp.shape) == (np.float32, (len(IDS) - 1, VOCAB))
    np.testing.assert_allclose(mtp, expected_mtp, **TOLERANCE)


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ("1,x", "--tokens: expected token ids separated by commas, like 1,2,3; got '1,x'"),
        ("", "--tokens: expected token ids separated by commas, like 1,2,3; got ''"),
        ("3,-1", "--tokens: token ids are not negative; got '3,-1'"),
        ("3,4096", "--tokens: token id 4096 is outside the vocabulary of tiny-moe (4096 ids)"),
    ],
)
def test_bad_tokens_exit_2_with_one_line(
    models_dir: Path, tmp_path: Path, tokens: str, message: str
):
    proc = run(
        "engine",
        "logits",
        "-c",
        f"models_dir={models_dir}",
        "--model",
        "tiny-moe",
        "--tokens",
        tokens,
        "--out",
        str(tmp_path / "x.npy"),
        check_rc=2,
    )
    assert proc.stderr == f"opencomposer: {message}\n"
    assert not list(tmp_path.iterdir())


def test_unknown_model_exits_2_with_one_line(models_dir: Path, tmp_path: Path):
    proc = run(
        "engine",
        "logits",
        "-c",
        f"models_dir={models_dir}",
        "--model",
        "no-such-model",
        "--tokens",
        "1,2",
        "--out",
        str(tmp_path / "x.npy"),
        check_rc=2,
    )
    assert proc.stderr.startswith("opencomposer: model 'no-such-model' is not available here")
    assert proc.stderr.count("\n") == 1


def test_bench_without_a_model_says_how_to_get_one(tmp_path: Path):
    proc = run("engine", "bench", "-c", f"models_dir={tmp_path}", check_rc=2)
    assert proc.stderr == (
        "opencomposer: no model to benchmark: create one with `opencomposer models init "
        "tiny-moe` or fetch one with `opencomposer models pull smollm2-135m`, or pass --model\n"
    )


@pytest.mark.slow
def test_bench_reports_every_figure(models_dir: Path):
    # One thread: on a shared 2-core box, two spin-waiting threads can be 10-40x slower.
    proc = run(
        "engine",
        "bench",
        "-c",
        f"models_dir={models_dir}",
        "--prompts",
        "2",
        "--max-tokens",
        "8",
        "--draft-tokens",
        "2",
        "--repeat",
        "1",
        "--threads",
        "1",
        "--json",
    )
    report = json.loads(proc.stdout)
    assert {
        key: report[key]
        for key in ("model", "device", "threads", "prompts", "max_tokens", "draft_tokens", "repeat")
    } == {
        "model": "tiny-moe",
        "device": "cpu",
        "threads": 1,
        "prompts": 2,
        "max_tokens": 8,
        "draft_tokens": 2,
        "repeat": 1,
    }
    rows = {row["name"]: row for row in report["rows"]}
    assert list(rows) == [
        "MTP k=1: output tokens/s",
        "MTP k=1: acceptance length",
        "MTP k=1: decode step",
        "MTP k=2: output tokens/s",
        "MTP k=2: acceptance length",
        "MTP k=2: decode step",
        "MTP: TPOT",
        "batch 4: output tokens/s",
        "batch 16: output tokens/s",
        "generate: output tokens/s",
        "prefill 512: tokens/s",
        "peak RSS",
    ]
    # Greedy speculation is lossless whatever the drafts.
    assert rows["MTP k=1: output tokens/s"]["identical"] is True
    assert rows["MTP k=2: output tokens/s"]["identical"] is True
    assert rows["generate: output tokens/s"]["identical"] in (True, False)
    for row in report["rows"]:
        assert row["ours"] >= 0, row
        if row["baseline"] is not None:
            assert row["baseline"] > 0 and row["ratio"] >= 0, row
    for name in (
        "MTP k=1: output tokens/s",
        "MTP k=2: output tokens/s",
        "MTP: TPOT",
        "batch 16: output tokens/s",
        "generate: output tokens/s",
        "prefill 512: tokens/s",
        "peak RSS",
    ):
        assert rows[name]["ours"] > 0, name
    assert 1.0 <= rows["MTP k=1: acceptance length"]["ours"] <= 2.0
    assert 1.0 <= rows["MTP k=2: acceptance length"]["ours"] <= 3.0
    for k in (1, 2):
        step = rows[f"MTP k={k}: decode step"]
        assert step["ours"] > 0 and step["baseline"] > 0, step
        assert f"the forward over {k + 1} tokens" in step["note"], step


@pytest.mark.slow
def test_bench_saves_the_fastest_number_of_drafts_into_the_model(models_dir: Path, tmp_path: Path):
    folder = tmp_path / "tiny"
    shutil.copytree(models_dir / "tiny-moe", folder)
    args = ("--prompts", "1", "--max-tokens", "6", "--repeat", "1", "--threads", "1")
    proc = run(
        "engine", "bench", "--model", str(folder), "--draft-tokens", "2", "--save", "--json", *args
    )
    saved = json.loads((folder / "speculative.json").read_text())
    assert f"wrote {folder / 'speculative.json'}" in proc.stderr
    speedups = saved["speedup_over_plain"]
    assert set(speedups) == {"1", "2"}
    # The saved speed-ups are the printed ones (not against the later plain run beside
    # transformers').
    rows = {row["name"]: row for row in json.loads(proc.stdout)["rows"]}
    for k in ("1", "2"):
        assert speedups[k] == round(rows[f"MTP k={k}: output tokens/s"]["ratio"], 3)
    best = max(speedups, key=speedups.get)
    assert saved["draft_tokens"] == (int(best) if speedups[best] > 1 else 0)
    assert saved["measured_on"]["threads"] == 1
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 0}))
    refused = run("engine", "bench", "--model", str(folder), "--save", *args, check_rc=2)
    assert refused.stderr.endswith("has no MTP layer: no number of drafts to save\n")


@pytest.mark.parametrize("flags", [["--spec", "none"], ["--draft-tokens", "2"], []])
def test_generate_serves_the_engine_flag_folder(models_dir: Path, flags: list[str]):
    """`--engine embedded:DIR` is the model, whatever other engine flags are left unset (the
    default model is not in this models_dir, so a run that fell back to it would fail)."""
    folder = models_dir / "tiny-moe"
    args = ["--max-tokens", "4", "--temperature", "0", "-c", f"models_dir={models_dir}", *flags]
    by_engine = run("engine", "generate", "hi", "--engine", f"embedded:{folder}", *args)
    by_model = run("engine", "generate", "hi", "--model", str(folder), *args)
    assert by_engine.stdout == by_model.stdout
