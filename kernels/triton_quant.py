"""Triton MXFP8 and NVFP4 quantizers: equal, code for code and scale for scale, to the
references in quantize.py.

The input is viewed as [R, K]; one program quantizes BLOCK_R rows by one block of K. The casts
are integer bit arithmetic, not Triton's float8 conversions, so that the rounding is the same
on every GPU and under the interpreter: E4M3 rounds its mantissa with the add-and-shift of
c10's fp8 conversion (subnormals by adding 2**14, whose float32 ulp is E4M3's 2**-9), and E2M1
counts the midpoints passed. Every division is `tl.div_rn` (IEEE round-to-nearest); Triton's
`/` on CUDA is an approximate division.

NVFP4 first reduces each row's amax (`_row_amax_kernel`, NaN where the row is not finite);
per_tensor takes the max of those, then one kernel derives g and quantizes.
"""

import torch
import triton
import triton.language as tl
from torch import Tensor

from opencomposer.kernels.quantize import MXFP8Tensor, NVFP4Scale, NVFP4Tensor

BLOCK_R = 16


@triton.jit
def _pow2(exponent):
    """2**exponent as float32 from its bits, for int32 exponents in [-126, 127]."""
    return ((exponent + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _encode_e4m3(y):
    """float32 -> E4M3 code (int32), round-to-nearest-even, saturating at ±448."""
    bits = y.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    a = tl.abs(y)
    a = tl.where(a > 448.0, 448.0, a)
    a_bits = a.to(tl.int32, bitcast=True)
    subnormal = (a + 16384.0).to(tl.int32, bitcast=True) - (141 << 23)
    odd = (a_bits >> 20) & 1
    normal = (a_bits - (120 << 23) + 0x7FFFF + odd) >> 20
    return tl.where(a_bits < (121 << 23), subnormal, normal) | sign


@triton.jit
def _decode_e4m3_positive(code):
    """Non-negative, non-NaN E4M3 code (int32) -> float32."""
    exponent = (code >> 3) & 15
    mantissa = code & 7
    sub = mantissa.to(tl.float32) * 0.001953125  # 2**-9
    normal = (mantissa + 8).to(tl.float32) * _pow2(exponent - 10)
    return tl.where(exponent == 0, sub, normal)


@triton.jit
def _encode_e2m1(y):
    """float32 -> E2M1 code (int32, bit 3 the sign), round-to-nearest-even, saturating at ±6."""
    a = tl.abs(y)
    magnitude = (
        (a > 0.25).to(tl.int32)
        + (a >= 0.75).to(tl.int32)
        + (a > 1.25).to(tl.int32)
        + (a >= 1.75).to(tl.int32)
        + (a > 2.5).to(tl.int32)
        + (a >= 3.5).to(tl.int32)
        + (a > 5.0).to(tl.int32)
    )
    return magnitude | ((y.to(tl.int32, bitcast=True) >> 28) & 0x8)


@triton.jit
def _mxfp8_kernel(x_ptr, codes_ptr, scales_ptr, R, K, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    row_ok = rows < R
    offs = rows[:, None].to(tl.int64) * K + cols[None, :]
    x = tl.load(x_ptr + offs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    a = tl.abs(x)
    bad = tl.max(((x != x) | (a == float("inf"))).to(tl.int32), axis=1) > 0
    amax = tl.max(a, axis=1)
    # The float32 exponent field is floor(log2) for normals; zeros and subnormals clamp to -127.
    exponent = ((amax.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127 - 8
    exponent = tl.minimum(tl.maximum(exponent, -127), 127)
    codes = _encode_e4m3(x * _pow2(-exponent)[:, None])
    codes = tl.where(bad[:, None], 0x7F, codes)
    tl.store(codes_ptr + offs, codes.to(tl.uint8), mask=row_ok[:, None])
    scales = tl.where(bad, 255, exponent + 127)
    tl.store(
        scales_ptr + rows.to(tl.int64) * (K // BLOCK) + tl.program_id(1),
        scales.to(tl.uint8),
        mask=row_ok,
    )


def quantize_mxfp8_triton(x: Tensor, *, block: int = 32) -> MXFP8Tensor:
    k = x.shape[-1]
    flat = x.reshape(-1, k).contiguous()
    rows = flat.shape[0]
    codes = torch.empty(flat.shape, dtype=torch.uint8, device=x.device)
    scales = torch.empty((rows, k // block), dtype=torch.uint8, device=x.device)
    grid = (triton.cdiv(rows, BLOCK_R), k // block)
    _mxfp8_kernel[grid](flat, codes, scales, rows, k, BLOCK=block, BLOCK_R=BLOCK_R)
    return MXFP8Tensor(codes.reshape(x.shape), scales.reshape(*x.shape[:-1], k // block))


@triton.jit
def _row_amax_kernel(x_ptr, amax_ptr, R, K, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):
    """amax of each row, NaN where the row holds a NaN or an infinity."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < R
    amax = tl.zeros((BLOCK_R,), dtype=tl.float32)
    bad = tl.zeros((BLOCK_R,), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        mask = row_ok[:, None] & (cols[None, :] < K)
        x = tl.load(x_ptr + rows[:, None].to(tl.int64) * K + cols[None, :], mask=mask, other=0.0)
        a = tl.abs(x.to(tl.float32))
        bad = tl.maximum(bad, tl.max(((a != a) | (a == float("inf"))).to(tl.int32), axis=1))
        amax = tl.maximum(amax, tl.max(tl.where(a != a, 0.0, a), axis=1))
    tl.store(amax_ptr + rows, tl.where(bad > 0, float("nan"), amax), mask=row_ok)


@triton.jit
def _nvfp4_kernel(
    x_ptr,
    amax_ptr,
    packed_ptr,
    scales_ptr,
    global_ptr,
    R,
    K,
    AMAX_STRIDE: tl.constexpr,
    BLOCK: tl.constexpr,
    BLOCK_R: tl.constexpr,
):
    pid_k = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < R
    pairs = pid_k * (BLOCK // 2) + tl.arange(0, BLOCK // 2)
    base = rows[:, None].to(tl.int64) * K + 2 * pairs[None, :]
    even = tl.load(x_ptr + base, mask=row_ok[:, None], other=0.0).to(tl.float32)
    odd = tl.load(x_ptr + base + 1, mask=row_ok[:, None], other=0.0).to(tl.float32)

    amax = tl.load(amax_ptr + rows * AMAX_STRIDE, mask=row_ok, other=0.0)
    g = tl.div_rn(amax, tl.full(amax.shape, 2688.0, tl.float32))  # 6 * 448
    g = tl.where(g == 0.0, 1.0, g)
    # One writer per global scale: the first block of each row, or of row 0 for per_tensor.
    writer = row_ok & ((rows * 0 + pid_k) == 0)
    if AMAX_STRIDE == 0:
        writer = writer & (rows == 0)
    tl.store(global_ptr + rows * AMAX_STRIDE, g, mask=writer)

    block_amax = tl.maximum(tl.max(tl.abs(even), axis=1), tl.max(tl.abs(odd), axis=1))
    scale_codes = _encode_e4m3(tl.div_rn(block_amax, 6.0 * g))
    dead = (scale_codes == 0) | (g != g)
    # Dead blocks get zero codes; dividing them by 1 instead of 0 only keeps 0/0 out.
    d = tl.where(dead, 1.0, _decode_e4m3_positive(scale_codes) * g)[:, None]
    lo = tl.where(dead[:, None], 0, _encode_e2m1(tl.div_rn(even, d + tl.zeros_like(even))))
    hi = tl.where(dead[:, None], 0, _encode_e2m1(tl.div_rn(odd, d + tl.zeros_like(odd))))
    tl.store(packed_ptr + base // 2, (lo | (hi << 4)).to(tl.uint8), mask=row_ok[:, None])
    scale_codes = tl.where(g != g, 0x7F, scale_codes)
    tl.store(
        scales_ptr + rows.to(tl.int64) * (K // BLOCK) + pid_k, scale_codes.to(tl.uint8), mask=row_ok
    )


def quantize_nvfp4_triton(
    x: Tensor, *, block: int = 16, scale: NVFP4Scale = "per_token"
) -> NVFP4Tensor:
    k = x.shape[-1]
    flat = x.reshape(-1, k).contiguous()
    rows = flat.shape[0]
    amax = torch.empty(rows, dtype=torch.float32, device=x.device)
    _row_amax_kernel[(triton.cdiv(rows, BLOCK_R),)](
        flat, amax, rows, k, BLOCK_K=64, BLOCK_R=BLOCK_R
    )
    if scale == "per_tensor":
        amax = amax.max().reshape(1)  # max is exact and propagates NaN
    packed = torch.empty((rows, k // 2), dtype=torch.uint8, device=x.device)
    scales = torch.empty((rows, k // block), dtype=torch.uint8, device=x.device)
    g = torch.empty_like(amax)
    grid = (triton.cdiv(rows, BLOCK_R), k // block)
    _nvfp4_kernel[grid](
        flat,
        amax,
        packed,
        scales,
        g,
        rows,
        k,
        AMAX_STRIDE=1 if scale == "per_token" else 0,
        BLOCK=block,
        BLOCK_R=BLOCK_R,
    )
    lead = x.shape[:-1]
    global_scale = g.reshape(*lead, 1) if scale == "per_token" else g
    return NVFP4Tensor(
        packed.reshape(*lead, k // 2), scales.reshape(*lead, k // block), global_scale
    )
