"""`opencomposer train pretrain`: help without torch, bad input as one line and exit 2."""

import subprocess
import sys
from pathlib import Path

from support.pretrain_fixtures import write_model

CLI = Path(sys.executable).with_name("opencomposer")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


def test_help_does_not_load_torch() -> None:
    code = (
        "import sys; from opencomposer.serving.cli.app import app\n"
        "try: app(['train', 'pretrain', '--help'])\n"
        "except SystemExit: pass\n"
        "print('torch loaded' if 'torch' in sys.modules else 'no torch')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "torchrun" in done.stdout and done.stdout.rstrip().endswith("no torch")


def test_missing_model_says_how_to_make_it(tmp_path: Path) -> None:
    done = run(
        "train", "pretrain", "--data", str(tmp_path), "--out", str(tmp_path / "out"),
        "-c", f"models_dir={tmp_path}",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "opencomposer: pretrain: tiny-moe is not installed: `opencomposer models init tiny-moe`\n"
    )


def test_resume_without_checkpoint_is_one_line(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    out = tmp_path / "out"
    done = run(
        "train", "pretrain", "--init", str(init), "--data", str(tmp_path), "--out", str(out),
        "--resume",
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        done.stderr
        == f"opencomposer: pretrain: --resume: {out} has no checkpoint (no {out / 'latest'})\n"
    )
