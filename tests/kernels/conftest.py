"""Triton kernels run on CPU through Triton's interpreter unless there is a GPU. The variable
must be set before triton is first imported; conftest modules load before test modules are
collected, in every xdist worker and under --import-mode=importlib."""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
