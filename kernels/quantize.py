"""MXFP8 and NVFP4 quantization: the PyTorch references, the tensor types, and dispatch.

MXFP8 (OCP Microscaling v1.0): every block of 32 along K shares an E8M0 scale
2**(floor(log2(amax)) - 8), and elements are E4M3 codes of x / scale. A block holding a NaN or
an infinity cannot be represented: its scale is E8M0 NaN (0xFF) and its codes E4M3 NaN (0x7F).

NVFP4: two levels of scale. A float32 global scale g = amax / (6 * 448) per token (row) or per
tensor, an E4M3 scale per block of 16, s = E4M3(amax_block / (6 * g)), and E2M1 codes of
x / (s * g). The division is true IEEE division: an approximate reciprocal moves values that
sit on an E2M1 midpoint to the other neighbour, which is what made training diverge. Choices
where the formulas give 0/0:
- amax == 0 (or amax / 2688 underflows): g = 1.0, so every block scale is E4M3(0) = 0;
- a block whose scale code is 0 (all zeros, or too small for E4M3) gets zero codes;
- a row (per_token) or tensor (per_tensor) holding a NaN or an infinity gets g = NaN, block
  scales 0x7F and zero codes, so it dequantizes to NaN.
Per-token scales make a row's codes independent of the rest of the batch.
"""

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from opencomposer.kernels.float_formats import (
    E2M1_MAX,
    E4M3_EMAX,
    E4M3_MAX,
    E8M0_BIAS,
    E8M0_NAN,
    decode_e2m1,
    decode_e4m3,
    decode_e8m0,
    encode_e2m1,
    encode_e4m3,
    floor_log2,
    pow2,
)
from opencomposer.kernels.implementation import Implementation, resolve

NVFP4Scale = Literal["per_token", "per_tensor"]
_INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class MXFP8Tensor:
    codes: Tensor
    """uint8 E4M3 codes, [..., K]."""
    scales: Tensor
    """uint8 E8M0 biased exponents, [..., K / block]."""

    @property
    def block(self) -> int:
        return self.codes.shape[-1] // self.scales.shape[-1]


@dataclass(frozen=True)
class NVFP4Tensor:
    packed: Tensor
    """uint8, [..., K / 2]: element 2i in the low nibble, 2i + 1 in the high nibble."""
    block_scales: Tensor
    """uint8 E4M3 codes, [..., K / block]."""
    global_scale: Tensor
    """float32, [..., 1] per token or [1] per tensor."""

    @property
    def block(self) -> int:
        return 2 * self.packed.shape[-1] // self.block_scales.shape[-1]


def _check(x: Tensor, block: int) -> None:
    if x.dtype not in _INPUT_DTYPES:
        raise ValueError(f"quantize float32, bfloat16 or float16, not {x.dtype}")
    if x.dim() == 0:
        raise ValueError("quantize a tensor with at least one dimension")
    # A power of two because the Triton kernels tile by it; both paths accept the same inputs.
    if block < 2 or block & (block - 1):
        raise ValueError(f"block must be a power of two >= 2, not {block}")
    if x.shape[-1] % block:
        raise ValueError(f"the last dimension ({x.shape[-1]}) must be divisible by block {block}")


def quantize_mxfp8(
    x: Tensor, *, block: int = 32, impl: Implementation | None = None
) -> MXFP8Tensor:
    _check(x, block)
    if resolve(impl, x.device) == "triton":
        from opencomposer.kernels.triton_quant import quantize_mxfp8_triton

        return quantize_mxfp8_triton(x, block=block)
    return quantize_mxfp8_reference(x, block=block)


def quantize_mxfp8_reference(x: Tensor, *, block: int = 32) -> MXFP8Tensor:
    _check(x, block)
    v = x.float().reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = v.abs().amax(dim=-1, keepdim=True)
    bad = ~v.isfinite().all(dim=-1, keepdim=True)
    # Tiny amaxes clamp to code 0; a zero amax (frexp's exponent 0 would say 2**-9) is set there.
    exponent = (floor_log2(amax) - E4M3_EMAX).clamp(-E8M0_BIAS, E8M0_BIAS)
    exponent = torch.where(amax == 0, -E8M0_BIAS, exponent)
    # x * 2**-exponent is x / 2**exponent exactly (-exponent <= 127 is a normal float32).
    codes = encode_e4m3(v * pow2(-exponent))
    nan_code = torch.tensor(0x7F, dtype=torch.uint8, device=x.device)
    codes = torch.where(bad, nan_code, codes)
    scales = torch.where(bad, E8M0_NAN, exponent + E8M0_BIAS).to(torch.uint8)
    return MXFP8Tensor(codes.reshape(x.shape), scales.squeeze(-1))


def quantize_nvfp4(
    x: Tensor,
    *,
    block: int = 16,
    scale: NVFP4Scale = "per_token",
    impl: Implementation | None = None,
) -> NVFP4Tensor:
    _check(x, block)
    if scale not in ("per_token", "per_tensor"):
        raise ValueError(f"scale is 'per_token' or 'per_tensor', not {scale!r}")
    if resolve(impl, x.device) == "triton":
        from opencomposer.kernels.triton_quant import quantize_nvfp4_triton

        return quantize_nvfp4_triton(x, block=block, scale=scale)
    return quantize_nvfp4_reference(x, block=block, scale=scale)


def nvfp4_global_scale(x: Tensor, scale: NVFP4Scale) -> Tensor:
    """g = amax / (6 * 448) per row ([..., 1]) or per tensor ([1]); 1.0 where that is 0, NaN
    where the row or tensor is not finite."""
    a = x.float().abs()
    if scale == "per_token":
        amax, finite = a.amax(dim=-1, keepdim=True), a.isfinite().all(dim=-1, keepdim=True)
    else:
        amax, finite = a.amax().reshape(1), a.isfinite().all().reshape(1)
    g = amax / (E2M1_MAX * E4M3_MAX)
    g = torch.where(g == 0, 1.0, g)
    return torch.where(finite, g, float("nan"))


def quantize_nvfp4_reference(
    x: Tensor,
    *,
    block: int = 16,
    scale: NVFP4Scale = "per_token",
    division: Literal["ieee", "reciprocal"] = "ieee",
) -> NVFP4Tensor:
    """`division="reciprocal"` multiplies by 1/d instead of dividing by d, the fast
    approximation the report saw diverge; only for measuring that (`bench kernels`)."""
    _check(x, block)
    g = nvfp4_global_scale(x, scale)
    v = x.float().reshape(*x.shape[:-1], x.shape[-1] // block, block)
    gb = g.unsqueeze(-1)  # broadcasts over blocks and elements
    amax = v.abs().amax(dim=-1, keepdim=True)
    scale_codes = encode_e4m3(amax / (6.0 * gb))
    nan_code = torch.tensor(0x7F, dtype=torch.uint8, device=x.device)
    scale_codes = torch.where(gb.isnan(), nan_code, scale_codes)
    d = decode_e4m3(scale_codes) * gb
    codes = encode_e2m1(v / d if division == "ieee" else v * d.reciprocal())
    dead = (scale_codes == 0) | gb.isnan()
    codes = torch.where(dead, torch.zeros_like(codes), codes).reshape(x.shape)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return NVFP4Tensor(packed, scale_codes.squeeze(-1), g)


def dequantize(t: MXFP8Tensor | NVFP4Tensor, *, impl: Implementation | None = None) -> Tensor:
    """The float32 values a quantized tensor stands for."""
    device = t.codes.device if isinstance(t, MXFP8Tensor) else t.packed.device
    if resolve(impl, device) == "triton":
        from opencomposer.kernels.triton_dequant import dequantize_triton

        return dequantize_triton(t)
    return dequantize_reference(t)


def dequantize_reference(t: MXFP8Tensor | NVFP4Tensor) -> Tensor:
    if isinstance(t, MXFP8Tensor):
        v = decode_e4m3(t.codes).reshape(*t.scales.shape, t.block)
        return (v * decode_e8m0(t.scales).unsqueeze(-1)).reshape(t.codes.shape)
    codes = torch.stack([t.packed & 0xF, t.packed >> 4], dim=-1).flatten(-2)
    v = decode_e2m1(codes).reshape(*t.block_scales.shape, t.block)
    d = decode_e4m3(t.block_scales).unsqueeze(-1) * t.global_scale.unsqueeze(-1)
    return (v * d).reshape(codes.shape)
