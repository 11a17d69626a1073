"""Matmuls of quantized operands: `a @ b.T` with `a` [..., K] activations and `b` [N, K] in
nn.Linear's layout, both in the same format, the product in float32.

The reference dequantizes both operands and runs one float32 matmul; it defines the result.
The Triton kernel decodes codes and scales tile by tile and accumulates with `tl.dot` in
float32, so it agrees to float32 rounding, not bit for bit (see the tolerance table in its test).
"""

import torch
from torch import Tensor

from opencomposer.kernels.implementation import Implementation, resolve
from opencomposer.kernels.quantize import MXFP8Tensor, NVFP4Tensor, dequantize_reference


def _shapes(a_k: int, b_shape: torch.Size, block_a: int, block_b: int) -> None:
    if len(b_shape) != 2 or b_shape[1] != a_k:
        raise ValueError(f"b must be [N, K] with K = {a_k}, not {list(b_shape)}")
    if block_a != block_b:
        raise ValueError(f"a and b must share a block size, not {block_a} and {block_b}")


def mxfp8_matmul(a: MXFP8Tensor, b: MXFP8Tensor, *, impl: Implementation | None = None) -> Tensor:
    """[..., K] x [N, K] -> [..., N] float32."""
    _shapes(a.codes.shape[-1], b.codes.shape, a.block, b.block)
    if resolve(impl, a.codes.device) == "triton":
        from opencomposer.kernels.triton_quantized_gemm import mxfp8_matmul_triton

        return mxfp8_matmul_triton(a, b)
    return quantized_matmul_reference(a, b)


def nvfp4_matmul(a: NVFP4Tensor, b: NVFP4Tensor, *, impl: Implementation | None = None) -> Tensor:
    """[..., K] x [N, K] -> [..., N] float32; either operand may have per-token or per-tensor
    global scales."""
    if b.packed.dim() != 2:
        raise ValueError(f"b must be [N, K] (packed [N, K / 2]), not packed {list(b.packed.shape)}")
    k = 2 * a.packed.shape[-1]
    _shapes(k, torch.Size([b.packed.shape[0], 2 * b.packed.shape[1]]), a.block, b.block)
    if resolve(impl, a.packed.device) == "triton":
        from opencomposer.kernels.triton_quantized_gemm import nvfp4_matmul_triton

        return nvfp4_matmul_triton(a, b)
    return quantized_matmul_reference(a, b)


def quantized_matmul_reference(
    a: MXFP8Tensor | NVFP4Tensor, b: MXFP8Tensor | NVFP4Tensor
) -> Tensor:
    return dequantize_reference(a) @ dequantize_reference(b).T
