"""One thread per test process: the machine's cores are shared with other test runs."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread() -> None:
    torch.set_num_threads(1)
