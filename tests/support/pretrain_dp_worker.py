"""One rank of the data-parallel test, started by torchrun: the same plan and synthetic rows
as the test's one-process run (argv: init folder, out folder)."""

import sys
from pathlib import Path

import torch

from opencomposer.training.distributed import DataParallel
from opencomposer.training.pretrain import two_stage_plan
from support.pretrain_fixtures import SyntheticRows

PLAN = two_stage_plan(32, 4, 64, 2, batch_rows=4, warmup=2, val_every=3, val_rows=6)
DATA = SyntheticRows(rows=16, val_rows=6)

if __name__ == "__main__":
    from opencomposer.training.pretrain import pretrain

    torch.set_num_threads(1)
    dp = DataParallel.from_env()
    pretrain(PLAN, Path(sys.argv[1]), DATA, Path(sys.argv[2]), dp=dp)
    dp.close()
