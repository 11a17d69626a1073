"""Triton tile GEMMs of quantized operands: `a @ b.T`, a [M, K], b [N, K] (nn.Linear layout).

Each program owns a [BLOCK_M, BLOCK_N] output tile and walks K: it loads codes and the scales
of their blocks, decodes them in registers and accumulates with `tl.dot` in float32. The
decoded operands are exact in TF32 (E4M3 * 2**e has 4 significant bits; NVFP4's
E2M1 * E4M3 block scale at most 6; TF32 keeps 11), so the tensor cores see exactly the
reference's values (bfloat16 would be exact too, but Triton 3.9's interpreter gets
bfloat16 operands of tl.dot wrong: errors of 1e11 against 5e-7 with float32);
NVFP4's float32 global scales are factored out of the sum and applied to the accumulator
(ga[m] * gb[n]), which is where the result differs from the reference by float32 rounding.
Tile sizes are a plain default, not tuned (no GPU measurement yet).
"""

import torch
import triton
import triton.language as tl
from torch import Tensor

from opencomposer.kernels.quantize import MXFP8Tensor, NVFP4Tensor
from opencomposer.kernels.triton_quant import _decode_e4m3_positive, _pow2

BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 64


@triton.jit
def _decode_e4m3(code):
    """E4M3 code (int32, sign and NaN included) -> float32."""
    value = _decode_e4m3_positive(code & 0x7F)
    value = tl.where((code & 0x7F) == 0x7F, float("nan"), value)
    return tl.where((code & 0x80) != 0, -value, value)


@triton.jit
def _decode_e8m0(code):
    """E8M0 code (int32) -> float32; 0 is 2**-127, a subnormal that `_pow2` cannot build."""
    value = tl.where(code == 0, 2.0**-127, (code << 23).to(tl.float32, bitcast=True))
    return tl.where(code == 255, float("nan"), value)


@triton.jit
def _decode_e2m1(code):
    """E2M1 code (int32, bit 3 the sign) -> float32."""
    exponent = (code >> 1) & 3
    mantissa = code & 1
    value = tl.where(
        exponent == 0,
        mantissa.to(tl.float32) * 0.5,
        (mantissa + 2).to(tl.float32) * _pow2(exponent - 2),
    )
    return tl.where((code & 8) != 0, -value, value)


@triton.jit
def _mxfp8_operand(codes_ptr, scales_ptr, rows, rk, R, K, BLOCK: tl.constexpr):
    mask = (rows < R)[:, None] & (rk < K)[None, :]
    offs = rows[:, None].to(tl.int64) * K + rk[None, :]
    codes = tl.load(codes_ptr + offs, mask=mask, other=0).to(tl.int32)
    s_offs = rows[:, None].to(tl.int64) * (K // BLOCK) + rk[None, :] // BLOCK
    scales = tl.load(scales_ptr + s_offs, mask=mask, other=127).to(tl.int32)
    return _decode_e4m3(codes) * _decode_e8m0(scales)


@triton.jit
def _nvfp4_operand(packed_ptr, scales_ptr, rows, rk, R, K, BLOCK: tl.constexpr):
    """E2M1 value times its block's E4M3 scale; the global scale is applied after the sum."""
    mask = (rows < R)[:, None] & (rk < K)[None, :]
    byte = tl.load(
        packed_ptr + rows[:, None].to(tl.int64) * (K // 2) + rk[None, :] // 2, mask=mask, other=0
    ).to(tl.int32)
    codes = (byte >> ((rk[None, :] & 1) * 4)) & 0xF
    s_offs = rows[:, None].to(tl.int64) * (K // BLOCK) + rk[None, :] // BLOCK
    scales = tl.load(scales_ptr + s_offs, mask=mask, other=0).to(tl.int32)
    return _decode_e2m1(codes) * _decode_e4m3(scales)


@triton.jit
def _quantized_gemm_kernel(
    a_ptr,
    a_scales_ptr,
    b_ptr,
    b_scales_ptr,
    ga_ptr,
    gb_ptr,
    out_ptr,
    M,
    N,
    K,
    NVFP4: tl.constexpr,
    GA_STRIDE: tl.constexpr,
    GB_STRIDE: tl.constexpr,
    BLOCK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        if NVFP4:
            a = _nvfp4_operand(a_ptr, a_scales_ptr, rm, rk, M, K, BLOCK)
            b = _nvfp4_operand(b_ptr, b_scales_ptr, rn, rk, N, K, BLOCK)
        else:
            a = _mxfp8_operand(a_ptr, a_scales_ptr, rm, rk, M, K, BLOCK)
            b = _mxfp8_operand(b_ptr, b_scales_ptr, rn, rk, N, K, BLOCK)
        acc = tl.dot(a, tl.trans(b), acc, input_precision="tf32")
    if NVFP4:
        ga = tl.load(ga_ptr + rm * GA_STRIDE, mask=rm < M, other=0.0)
        gb = tl.load(gb_ptr + rn * GB_STRIDE, mask=rn < N, other=0.0)
        acc = acc * (ga[:, None] * gb[None, :])
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc, mask=mask)


def _launch(
    a: Tensor,
    a_scales: Tensor,
    b: Tensor,
    b_scales: Tensor,
    k: int,
    block: int,
    ga: Tensor | None = None,
    gb: Tensor | None = None,
) -> Tensor:
    lead = a.shape[:-1]
    a2, sa = a.reshape(-1, a.shape[-1]).contiguous(), a_scales.reshape(-1, k // block).contiguous()
    m, n = a2.shape[0], b.shape[0]
    out = torch.empty((m, n), dtype=torch.float32, device=a.device)
    nvfp4 = ga is not None and gb is not None
    ga_flat = ga.reshape(-1).contiguous() if ga is not None else out
    gb_flat = gb.reshape(-1).contiguous() if gb is not None else out
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _quantized_gemm_kernel[grid](
        a2,
        sa,
        b.contiguous(),
        b_scales.contiguous(),
        ga_flat,
        gb_flat,
        out,
        m,
        n,
        k,
        NVFP4=nvfp4,
        GA_STRIDE=1 if ga_flat.numel() > 1 else 0,
        GB_STRIDE=1 if gb_flat.numel() > 1 else 0,
        BLOCK=block,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        BLOCK_K=BLOCK_K,
    )
    return out.reshape(*lead, n)


def mxfp8_matmul_triton(a: MXFP8Tensor, b: MXFP8Tensor) -> Tensor:
    return _launch(a.codes, a.scales, b.codes, b.scales, a.codes.shape[-1], a.block)


def nvfp4_matmul_triton(a: NVFP4Tensor, b: NVFP4Tensor) -> Tensor:
    k = 2 * a.packed.shape[-1]
    return _launch(
        a.packed,
        a.block_scales,
        b.packed,
        b.block_scales,
        k,
        a.block,
        a.global_scale,
        b.global_scale,
    )
