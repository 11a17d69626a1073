"""Compute kernels (MoE routing and grouped GEMM, MXFP8/NVFP4, attention helpers): a named
pure-PyTorch reference beside every fast version. Imports nothing of the project.
"""

# MXFP8 / NVFP4 quantization and quantized matmuls (kernels/quantize.py, quantized_matmul.py).
from opencomposer.kernels.quantize import (
    MXFP8Tensor,
    NVFP4Tensor,
    dequantize,
    quantize_mxfp8,
    quantize_nvfp4,
)
from opencomposer.kernels.quantized_matmul import mxfp8_matmul, nvfp4_matmul

__all__ = [
    # quantization
    "MXFP8Tensor",
    "NVFP4Tensor",
    "dequantize",
    "mxfp8_matmul",
    "nvfp4_matmul",
    "quantize_mxfp8",
    "quantize_nvfp4",
]
