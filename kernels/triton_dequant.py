"""Triton dequantization of MXFP8 / NVFP4 tensors, bit for bit the reference's float32.

Elementwise over the flat [R * K] elements of a contiguous tensor: element e's block scale is
at e // BLOCK (K is a multiple of BLOCK), its NVFP4 byte at e // 2 (low nibble for even e), its
per-token global scale at e // K. Each value is the same single float32 product as in the
reference (code value * scale, with NVFP4's scale = block scale * global scale).
"""

import torch
import triton
import triton.language as tl
from torch import Tensor

from opencomposer.kernels.quantize import MXFP8Tensor, NVFP4Tensor
from opencomposer.kernels.triton_quantized_gemm import _decode_e2m1, _decode_e4m3, _decode_e8m0

BLOCK_E = 1024


@triton.jit
def _mxfp8_dequant_kernel(
    codes_ptr, scales_ptr, out_ptr, numel, BLOCK: tl.constexpr, BLOCK_E: tl.constexpr
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = offs < numel
    codes = tl.load(codes_ptr + offs, mask=mask, other=0).to(tl.int32)
    scales = tl.load(scales_ptr + offs // BLOCK, mask=mask, other=127).to(tl.int32)
    tl.store(out_ptr + offs, _decode_e4m3(codes) * _decode_e8m0(scales), mask=mask)


@triton.jit
def _nvfp4_dequant_kernel(
    packed_ptr,
    scales_ptr,
    global_ptr,
    out_ptr,
    numel,
    K,
    PER_TOKEN: tl.constexpr,
    BLOCK: tl.constexpr,
    BLOCK_E: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = offs < numel
    byte = tl.load(packed_ptr + offs // 2, mask=mask, other=0).to(tl.int32)
    codes = (byte >> ((offs & 1) * 4).to(tl.int32)) & 0xF
    scales = tl.load(scales_ptr + offs // BLOCK, mask=mask, other=0).to(tl.int32)
    g = tl.load(global_ptr + (offs // K) * PER_TOKEN, mask=mask, other=1.0)
    tl.store(out_ptr + offs, _decode_e2m1(codes) * (_decode_e4m3(scales) * g), mask=mask)


def dequantize_triton(t: MXFP8Tensor | NVFP4Tensor) -> Tensor:
    if isinstance(t, MXFP8Tensor):
        out = torch.empty(t.codes.shape, dtype=torch.float32, device=t.codes.device)
        grid = (triton.cdiv(out.numel(), BLOCK_E),)
        _mxfp8_dequant_kernel[grid](
            t.codes.contiguous(),
            t.scales.contiguous(),
            out,
            out.numel(),
            BLOCK=t.block,
            BLOCK_E=BLOCK_E,
        )
        return out
    k = 2 * t.packed.shape[-1]
    out = torch.empty((*t.packed.shape[:-1], k), dtype=torch.float32, device=t.packed.device)
    grid = (triton.cdiv(out.numel(), BLOCK_E),)
    # One global scale (per_tensor, or a single row) is read at index 0 by every element.
    per_token = t.global_scale.numel() > 1
    _nvfp4_dequant_kernel[grid](
        t.packed.contiguous(),
        t.block_scales.contiguous(),
        t.global_scale.contiguous(),
        out,
        out.numel(),
        k,
        PER_TOKEN=int(per_token),
        BLOCK=t.block,
        BLOCK_E=BLOCK_E,
    )
    return out
