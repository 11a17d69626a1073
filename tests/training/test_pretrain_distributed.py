"""Two gloo processes under torchrun train like one process at the same global batch."""

import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from support.pretrain_dp_worker import DATA, PLAN
from support.pretrain_fixtures import write_model

from opencomposer.training.pretrain import pretrain
from opencomposer.training.train_log import read_metrics

TESTS = Path(__file__).parents[1]


def test_two_processes_equal_one(tmp_path: Path) -> None:
    init = write_model(tmp_path / "init")
    pretrain(PLAN, init, DATA, tmp_path / "one")
    env = os.environ | {
        "PYTHONPATH": str(TESTS),
        "OMP_NUM_THREADS": "1",
    }
    worker = TESTS / "support" / "pretrain_dp_worker.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", str(worker), str(init), str(tmp_path / "two")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    one = read_metrics(tmp_path / "one" / "metrics.jsonl")
    two = read_metrics(tmp_path / "two" / "metrics.jsonl")
    assert [(e["step"], sorted(e)) for e in one] == [(e["step"], sorted(e)) for e in two]
    for a, b in zip(one, two, strict=True):
        for key in ("loss", "val_loss", "grad_norm"):
            if key in a:
                # Sums over ranks add in another order than one process: float32 rounding.
                assert abs(a[key] - b[key]) < 1e-4 * max(1.0, abs(a[key])), (a["step"], key)
        # The loads are counted the same, so the bias updates (and balance) agree exactly.
        assert a.get("expert_max_mean") == b.get("expert_max_mean")
    final = f"checkpoint-{PLAN.total_steps}"
    weights_one = load_file(tmp_path / "one" / final / "model.safetensors")
    weights_two = load_file(tmp_path / "two" / final / "model.safetensors")
    for name, tensor in weights_one.items():
        torch.testing.assert_close(weights_two[name], tensor, rtol=1e-4, atol=1e-5)
