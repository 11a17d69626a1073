"""Compute kernels (MoE routing and grouped GEMM, MXFP8/NVFP4, attention helpers): a named
pure-PyTorch reference beside every fast version, the implementation chosen by one setting
(`engine.kernels`, see `implementation`). Imports nothing of the project.
"""

from opencomposer.kernels.fake_quant import FakeQuantLinear, QuantRecipe
from opencomposer.kernels.implementation import (
    Implementation,
    KernelUnavailable,
    chosen_implementation,
    set_implementation,
)
from opencomposer.kernels.moe import (
    expert_offsets,
    grouped_gemm,
    moe_experts,
    permute,
    permute_tokens,
    route_grouped_topk,
    unpermute,
)
from opencomposer.kernels.quantize import (
    MXFP8Tensor,
    NVFP4Tensor,
    dequantize,
    quantize_mxfp8,
    quantize_nvfp4,
)
from opencomposer.kernels.quantized_matmul import mxfp8_matmul, nvfp4_matmul

__all__ = [
    "FakeQuantLinear",
    "Implementation",
    "KernelUnavailable",
    "MXFP8Tensor",
    "NVFP4Tensor",
    "QuantRecipe",
    "chosen_implementation",
    "dequantize",
    "expert_offsets",
    "grouped_gemm",
    "moe_experts",
    "mxfp8_matmul",
    "nvfp4_matmul",
    "permute",
    "permute_tokens",
    "quantize_mxfp8",
    "quantize_nvfp4",
    "route_grouped_topk",
    "set_implementation",
    "unpermute",
]
