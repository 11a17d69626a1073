"""MXFP8 / NVFP4 reference quantizers against hand-derived vectors, properties and torchao."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from opencomposer.kernels import dequantize, quantize_mxfp8, quantize_nvfp4
from opencomposer.kernels.float_formats import decode_e4m3, encode_e2m1
from opencomposer.kernels.implementation import Implementation

SHAPES = [(3, 5, 64), (1, 32), (7, 1, 96), (32,)]


def unpack(packed: Tensor) -> Tensor:
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2)


def test_mxfp8_hand_vector() -> None:
    # amax 6.0: floor(log2 6) = 2, exponent 2 - 8 = -6 (code 121); x / 2**-6 = 64 x.
    x = torch.zeros(64)
    x[0], x[1], x[2], x[3] = 6.0, -1.0, 2.0**-20, 3.125 / 64  # 3.125: a tie
    x[32] = 1000.0  # second block: floor(log2 1000) = 9, exponent 1, x / 2 = 500 -> 448
    x[33] = 2.0**-8  # 2**-9 after scaling: E4M3's smallest subnormal
    q = quantize_mxfp8(x)
    assert q.scales.tolist() == [121, 128]
    # 384 = 1.5 * 2**8 (0x7C); -64 (0xE8 with sign); 2**-14 -> 0; 3.125 ties 3.0 / 3.25 -> 3.0
    assert q.codes[:4].tolist() == [0x7C, 0xE8, 0x00, 0x44]
    assert q.codes[32:34].tolist() == [0x7E, 0x01]  # 500 saturates at 448 (480 would be NaN)
    assert dequantize(q)[32].item() == 896.0


def test_mxfp8_overflow_within_block_saturates() -> None:
    # amax 1.999 has floor(log2) 0, so scaled values reach 1.999 * 256 = 511.7 > 448: saturate.
    q = quantize_mxfp8(torch.full((32,), 1.999))
    assert q.scales.tolist() == [119] and set(q.codes.tolist()) == {0x7E}


def test_mxfp8_zero_and_nan_blocks() -> None:
    x = torch.zeros(2, 96)
    x[0, 40] = math.nan
    x[1, 70] = math.inf
    x[1, 0] = 1.0
    q = quantize_mxfp8(x)
    assert q.scales.tolist() == [[0, 0xFF, 0], [119, 0, 0xFF]]
    assert torch.equal(q.codes[0, :32], torch.zeros(32, dtype=torch.uint8))
    assert set(q.codes[0, 32:64].tolist()) == {0x7F} and set(q.codes[1, 64:].tolist()) == {0x7F}
    assert dequantize(q)[0, :32].eq(0).all() and dequantize(q)[0, 32:64].isnan().all()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_shapes_and_dtypes(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    q = quantize_mxfp8(x)
    assert q.codes.shape == shape and q.scales.shape == (*shape[:-1], shape[-1] // 32)
    assert torch.equal(quantize_mxfp8(x.float()).codes, q.codes)
    n = quantize_nvfp4(x)
    assert n.packed.shape == (*shape[:-1], shape[-1] // 2)
    assert n.block_scales.shape == (*shape[:-1], shape[-1] // 16)
    assert n.global_scale.shape == (*shape[:-1], 1)
    assert quantize_nvfp4(x, scale="per_tensor").global_scale.shape == (1,)
    assert dequantize(q).shape == shape and dequantize(n).dtype == torch.float32


@pytest.mark.parametrize(
    ("shape", "block", "message"),
    [((4, 48), 32, "divisible"), ((4, 24), 16, "divisible"), ((4, 48), 24, "power of two")],
)
def test_bad_shapes_raise(shape: tuple[int, ...], block: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        quantize_mxfp8(torch.ones(shape), block=block)
    with pytest.raises(ValueError, match=message):
        quantize_nvfp4(torch.ones(shape), block=block)


def test_nvfp4_hand_vector() -> None:
    # Row amax 2688 = 6 * 448, so g = 1. Block 0's amax 2688 -> scale 448 (0x7E): codes of
    # x / 448. Block 1's amax 3 -> scale E4M3(0.5) = 0x30: codes of x / 0.5.
    x = torch.zeros(32)
    x[0], x[1], x[2] = 2688.0, -448.0 * 2.5, 448.0 * 0.25  # 6; -2.5 ties to -2; 0.25 ties to 0
    x[16], x[17], x[18] = 3.0, 0.375, -0.875  # 6; 0.75 ties up to 1; -1.75 ties up to -2
    n = quantize_nvfp4(x)
    assert n.global_scale.tolist() == [1.0] and n.block_scales.tolist() == [0x7E, 0x30]
    assert unpack(n.packed)[[0, 1, 2, 16, 17, 18]].tolist() == [7, 12, 0, 7, 2, 12]
    assert n.packed[0].item() == 7 | (12 << 4)  # element 0 low nibble, element 1 high


def test_nvfp4_zero_rows_blocks_and_nan() -> None:
    x = torch.zeros(3, 32)
    x[1, 20] = 5.0
    x[2, 3] = math.nan
    n = quantize_nvfp4(x)
    assert n.global_scale[0].item() == 1.0 and n.global_scale[2].isnan()
    assert n.block_scales.tolist() == [[0, 0], [0, 0x7E], [0x7F, 0x7F]]
    assert unpack(n.packed)[[0, 2]].eq(0).all() and unpack(n.packed)[1].count_nonzero() == 1
    d = dequantize(n)
    assert d[0].eq(0).all() and d[1, 20].item() == 5.0 and d[2].isnan().all()
    assert quantize_nvfp4(torch.zeros(4, 16), scale="per_tensor").global_scale.tolist() == [1.0]


def test_nvfp4_per_token_is_independent_of_the_batch() -> None:
    row = torch.randn(1, 64, generator=torch.Generator().manual_seed(1))
    batch = torch.cat([row, 1000 * torch.randn(1, 64)])
    for scale, same in (("per_token", True), ("per_tensor", False)):
        alone, inside = quantize_nvfp4(row, scale=scale), quantize_nvfp4(batch, scale=scale)
        equal = torch.equal(alone.packed[0], inside.packed[0]) and torch.equal(
            alone.block_scales[0], inside.block_scales[0]
        )
        assert equal is same, scale


def reciprocal_codes(x: Tensor) -> Tensor:
    """What the quantizer would give with x * (1 / d) instead of x / d (one row, g from it)."""
    g = x.abs().amax() / 2688
    s = decode_e4m3(
        (x.abs().reshape(-1, 16).amax(-1, keepdim=True) / (6 * g))
        .to(torch.float8_e4m3fn)
        .view(torch.uint8)
    )
    return encode_e2m1(x.reshape(-1, 16) * (1 / (s * g))).flatten()


def division_sensitive_row() -> Tensor:
    """One block per candidate global amax: its amax sets g and the block scale 448, and the
    other elements sit exactly on E2M1 midpoints k * d, d = 448 * g. Only candidates where
    x * (1 / d) lands off the midpoint (so rounds the other way) are kept."""
    blocks = []
    for amax in torch.linspace(1.0, 2.0, 4000).tolist():
        a = torch.tensor(amax)
        d = 448 * (a / 2688)
        block = torch.cat([a.reshape(1), d * torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])])
        block = torch.cat([block, torch.zeros(8)])
        exact = (block[1:8].double() / d.double()) == torch.tensor(
            [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float64
        )
        true_codes = encode_e2m1(block / d)
        if exact.all() and not torch.equal(reciprocal_codes(block), true_codes):
            blocks.append(block)
    return torch.stack(blocks)


@pytest.mark.parametrize("impl", ["reference", "triton"])
def test_nvfp4_divides_exactly(impl: Implementation) -> None:
    if impl == "triton":
        pytest.importorskip("triton", reason="triton is not installed")
    rows = division_sensitive_row()
    assert len(rows) >= 5, "the crafted values no longer tell x / d from x * (1 / d)"
    n = quantize_nvfp4(rows, impl=impl)
    assert n.block_scales[:, 0].eq(0x7E).all()
    codes = unpack(n.packed)[:, 1:8]
    assert codes.tolist() == [[0, 2, 2, 4, 4, 6, 6]] * len(rows)
    assert not torch.equal(torch.stack([reciprocal_codes(r) for r in rows])[:, 1:8], codes)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e4, 1e4, allow_nan=False, width=32), min_size=32, max_size=32).map(
        torch.tensor
    )
)
def test_round_trip_error_is_half_an_ulp_at_the_block_scale(x: Tensor) -> None:
    # MXFP8: element step at most 2**(e - 3) for a value in binade e (subnormals: 2**-9 scaled).
    q = quantize_mxfp8(x)
    scale = 2.0 ** (q.scales.item() - 127)
    y = (x / scale).clamp(-448, 448)
    binade = torch.floor(torch.log2(y.abs().clamp(min=2.0**-6)))
    bound = 2.0 ** (binade - 4) * scale + (x.abs() - 448 * scale).clamp(min=0)
    assert ((dequantize(q) - x).abs() <= bound).all()
    # NVFP4: E2M1 steps are 0.5 below 2, 1 below 4, 2 up to 6, times the block's divisor.
    n = quantize_nvfp4(x.reshape(2, 16), scale="per_tensor")
    d = decode_e4m3(n.block_scales) * n.global_scale  # [2 rows, 1 block]
    r = torch.where(d > 0, x.reshape(2, 16) / d, 0).abs()
    step = torch.where(r < 2, 0.5, torch.where(r < 4, 1.0, 2.0))
    # A block whose scale rounds to E4M3 zero has amax / (6 g) < 2**-10 and dequantizes to 0.
    bound4 = torch.where(d > 0, step / 2 * d + (r - 6).clamp(min=0) * d, 6 * n.global_scale / 1024)
    assert ((dequantize(n) - x.reshape(2, 16)).abs() <= bound4 * (1 + 1e-6)).all()
