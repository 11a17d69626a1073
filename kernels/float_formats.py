"""The three narrow float formats of MXFP8 and NVFP4, as exact pure-PyTorch casts.

E4M3 ("fn": no infinities, NaN = 0x7F/0xFF, max 448) goes through torch's float8_e4m3fn
dtype after a clamp, so overflow saturates whatever the torch build does with it; the tests
check torch's rounding against all 256 hand-decoded codes and their midpoints. E2M1 has no
castable torch dtype in 2.13 (`float4_e2m1fn_x2` exists but has no copy kernel), so its
round-to-nearest-even is spelled out as comparisons with the seven midpoints. E8M0 is a bare
power of two: a biased exponent, 255 = NaN.
"""

import torch
from torch import Tensor

E4M3_MAX = 448.0
E4M3_EMAX = 8  # floor(log2(448)): the OCP MX scale puts a block's amax in E4M3's top binade.
E2M1_MAX = 6.0
E8M0_BIAS = 127
E8M0_NAN = 255

# E2M1 magnitudes by code, and the midpoints between neighbours. A midpoint rounds to the
# neighbour with the even code: down (strict >) at 0.25, 1.25, 2.5, 5; up (>=) at 0.75, 1.75, 3.5.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1_TIES_DOWN = (0.25, 1.25, 2.5, 5.0)
_E2M1_TIES_UP = (0.75, 1.75, 3.5)


def encode_e4m3(x: Tensor) -> Tensor:
    """float32 -> E4M3 codes (uint8), round-to-nearest-even, saturating at ±448; NaN -> NaN."""
    return x.float().clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)


def decode_e4m3(codes: Tensor) -> Tensor:
    return codes.view(torch.float8_e4m3fn).float()


def encode_e2m1(x: Tensor) -> Tensor:
    """float32 -> E2M1 codes (uint8 in the low nibble, bit 3 the sign), round-to-nearest-even,
    saturating at ±6. E2M1 has no NaN: callers must not pass one."""
    x = x.float()
    a = x.abs()
    magnitude = torch.zeros_like(x, dtype=torch.uint8)
    for mid in _E2M1_TIES_DOWN:
        magnitude += (a > mid).to(torch.uint8)
    for mid in _E2M1_TIES_UP:
        magnitude += (a >= mid).to(torch.uint8)
    return magnitude | (torch.signbit(x).to(torch.uint8) << 3)


def decode_e2m1(codes: Tensor) -> Tensor:
    table = torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), device=codes.device)
    return table[codes.long() & 0xF]


def floor_log2(x: Tensor) -> Tensor:
    """floor(log2(x)) of positive finite float32, exact (subnormals too), as int32."""
    _, exponent = torch.frexp(x.float())
    return exponent - 1


def pow2(exponent: Tensor) -> Tensor:
    """2**exponent as float32, exact, for int32 exponents in [-126, 127] (built from bits, so no
    pow/exp2 rounding)."""
    return ((exponent + 127) << 23).to(torch.int32).view(torch.float32)


def decode_e8m0(codes: Tensor) -> Tensor:
    """E8M0 codes -> float32: 2**(code - 127); code 0 is 2**-127 (a float32 subnormal)."""
    c = codes.to(torch.int32)
    normal = (c << 23).view(torch.float32)
    value = torch.where(c == 0, torch.tensor(2.0**-127, device=codes.device), normal)
    return torch.where(c == E8M0_NAN, torch.tensor(float("nan"), device=codes.device), value)
