"""Which implementation a public kernel runs: the PyTorch reference or the Triton kernel.

One process-wide choice, set once from the configuration (`engine.kernels`) by whoever owns
the process (the engine, the trainer), and overridable per call for tests and benchmarks.
The reference is the definition; a Triton kernel is only ever an equal, faster copy of it.

CPU tensors always run the reference, except under Triton's interpreter
(`TRITON_INTERPRET=1`, set before triton is imported), which is how CI runs every Triton
kernel on CPU against its reference. Asking for Triton on a CUDA tensor where triton does not
import is an error, not a silent fallback: a benchmark or a deployment that believes it runs
the fast path must not be measuring the slow one.
"""

import importlib.util
import os
from functools import cache
from typing import Literal, get_args

import torch

Implementation = Literal["reference", "triton"]
IMPLEMENTATIONS: tuple[Implementation, ...] = get_args(Implementation)

_chosen: Implementation = "reference"


class KernelUnavailable(RuntimeError):
    """The Triton implementation was asked for where it cannot run."""


def set_implementation(choice: Implementation) -> None:
    """Make `choice` the default of every kernel call that does not name one."""
    global _chosen
    if choice not in IMPLEMENTATIONS:
        raise ValueError(f"unknown kernel implementation {choice!r}; one of {IMPLEMENTATIONS}")
    _chosen = choice


def chosen_implementation() -> Implementation:
    return _chosen


def triton_interpreting() -> bool:
    """Whether Triton kernels run on CPU tensors through Triton's interpreter."""
    return os.environ.get("TRITON_INTERPRET") == "1"


@cache  # asked on every kernel call that resolves to Triton
def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def resolve(requested: Implementation | None, device: torch.device) -> Implementation:
    """The implementation a call on `device` runs, given what it asked for (None: the
    process-wide choice)."""
    choice = _chosen if requested is None else requested
    if choice not in IMPLEMENTATIONS:
        raise ValueError(f"unknown kernel implementation {choice!r}; one of {IMPLEMENTATIONS}")
    if choice == "reference":
        return "reference"
    if device.type == "cpu" and not triton_interpreting():
        return "reference"
    if device.type not in ("cpu", "cuda"):
        raise KernelUnavailable(f"the Triton kernels run on CUDA devices, not {device.type}")
    if not triton_installed():
        raise KernelUnavailable(
            "engine.kernels is 'triton' but triton is not installed "
            "(pip install 'opencomposer[kernels]')"
        )
    return "triton"
