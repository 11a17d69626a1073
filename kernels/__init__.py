"""Compute kernels (MoE routing and grouped GEMM, MXFP8/NVFP4, attention helpers): a named
pure-PyTorch reference beside every fast version. Imports nothing of the project.
"""

# Which implementation every kernel runs (shared by all kernel families).
from opencomposer.kernels.implementation import (
    Implementation,
    KernelUnavailable,
    chosen_implementation,
    set_implementation,
)

# MoE: DeepSeek-V3 routing (with router replay) and the SwiGLU experts' permute / grouped
# GEMM / unpermute steps; each step takes `impl` ("reference" | "triton").
from opencomposer.kernels.moe import (
    expert_offsets,
    grouped_gemm,
    moe_experts,
    permute,
    permute_tokens,
    route_grouped_topk,
    unpermute,
)

__all__ = [
    "Implementation",
    "KernelUnavailable",
    "chosen_implementation",
    "expert_offsets",
    "grouped_gemm",
    "moe_experts",
    "permute",
    "permute_tokens",
    "route_grouped_topk",
    "set_implementation",
    "unpermute",
]
