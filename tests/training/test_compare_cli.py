"""`opencomposer train compare`: pretraining runs side by side, from their metrics.jsonl."""

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = Path(sys.executable).with_name("opencomposer")


def write_run(folder: Path, *, loads: list[float], val_losses: list[float], rate: float) -> Path:
    """A metrics.jsonl shaped as `train pretrain` writes it: 10 steps of 64 tokens, held-out
    loss every 5 steps; `loads` is the max/mean expert load of each of two MoE layers."""
    folder.mkdir(parents=True)
    lines = []
    for step in range(10):
        tokens = 64 * (step + 1)
        lines.append(
            {
                "step": step,
                "stage": "short",
                "tokens": tokens,
                "loss": 5.0 - step / 10,
                "expert_max_mean": [x + 1 - step / 10 for x in loads],
                "tokens_per_s": rate if step else rate / 10,
            }
        )
        if step % 5 == 4:
            lines.append({"step": step, "tokens": tokens, "val_loss": val_losses[step // 5]})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    return folder


def test_two_runs_side_by_side(tmp_path: Path) -> None:
    balanced = write_run(tmp_path / "bias", loads=[1.5, 1.7], val_losses=[5.0, 4.25], rate=900)
    unbalanced = write_run(tmp_path / "plain", loads=[3.0, 4.0], val_losses=[5.0, 4.5], rate=800)
    out = tmp_path / "compare"
    done = subprocess.run(
        [CLI, "train", "compare", f"with bias={balanced}", str(unbalanced), "--out", str(out)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if "│" in line}
    # The last step's loads (the last tenth of 10 steps), the median rate (the slow first step
    # left out), the last held-out loss.
    cells = [c.strip() for c in rows["with bias"].split("│")[2:-1]]
    assert cells == ["10", "640", "4.2500", "900", "1.70"]
    cells = [c.strip() for c in rows["plain"].split("│")[2:-1]]
    assert cells == ["10", "640", "4.5000", "800", "3.60"]
    assert sorted(p.name for p in out.iterdir()) == [
        "compare_expert_balance.png",
        "compare_loss.png",
        "compare_throughput.png",
    ]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in out.iterdir())


def test_a_folder_without_metrics_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [CLI, "train", "compare", str(tmp_path), "--out", str(tmp_path / "c")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"opencomposer: {tmp_path}: no metrics.jsonl (not a `train pretrain` output folder)\n"
    )
    assert not (tmp_path / "c").exists()
