"""Triton quantizers, dequantization and quantized GEMMs against the references: codes, scales
and dequantized floats bit for bit, GEMMs to float32 tolerance. On CPU they run under Triton's
interpreter (set in tests/conftest.py); the `gpu` copies run compiled on CUDA.

| comparison                       | atol / rtol | measured (interpreter) | why                  |
|----------------------------------|-------------|------------------------|----------------------|
| mxfp8_matmul triton vs reference | 1e-5 / 1e-5 | 9.5e-7 abs             | sum order (K tiles)  |
| nvfp4_matmul triton vs reference | 1e-4 / 1e-4 | 1.1e-5 abs             | g applied after sum  |
"""

import math

import pytest
import torch
from torch import Tensor

from opencomposer.kernels import (
    dequantize,
    mxfp8_matmul,
    nvfp4_matmul,
    quantize_mxfp8,
    quantize_nvfp4,
)
from opencomposer.kernels.implementation import Implementation
from opencomposer.kernels.quantize import NVFP4Scale

pytest.importorskip(
    "triton", reason="triton is not installed (pip install 'opencomposer[kernels]')"
)

# Leading shapes that are not multiples of the 16-row / 32-row tiles.
SHAPES = [(1, 32), (3, 5, 64), (7, 1, 48), (7, 1, 96), (17, 64)]  # 48: NVFP4 only
GEMMS = [((7,), 9, 64), ((3, 5), 33, 96), ((1,), 1, 32), ((40,), 35, 128)]
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def awkward(shape: tuple[int, ...], seed: int, device: str) -> Tensor:
    """Values over 16 binades with zeros, a NaN row, E4M3 subnormals and ties."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.logspace(-8, 8, shape[-1])
    flat = x.view(-1, shape[-1])
    flat[0, :16] = 0.0
    flat[0, 16] = 3.125 / 64
    if flat.shape[0] > 2:
        flat[1, 5] = math.nan
    return x.to(device)


def same_bits(a: Tensor, b: Tensor) -> None:
    assert a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


def check_quantizers(device: str) -> None:
    for i, shape in enumerate(SHAPES):
        for dtype in (torch.float32, torch.bfloat16):
            x = awkward(shape, i, device).to(dtype)
            if shape[-1] % 32 == 0:
                fast, ref = quantize_mxfp8(x, impl="triton"), quantize_mxfp8(x, impl="reference")
                assert torch.equal(fast.codes, ref.codes) and torch.equal(fast.scales, ref.scales)
                same_bits(dequantize(ref, impl="triton"), dequantize(ref, impl="reference"))
            for scale in ("per_token", "per_tensor"):
                mode: NVFP4Scale = scale  # type: ignore[assignment]
                f = quantize_nvfp4(x, scale=mode, impl="triton")
                r = quantize_nvfp4(x, scale=mode, impl="reference")
                assert torch.equal(f.packed, r.packed), (shape, scale)
                assert torch.equal(f.block_scales, r.block_scales), (shape, scale)
                torch.testing.assert_close(
                    f.global_scale, r.global_scale, rtol=0, atol=0, equal_nan=True
                )


def check_gemms(device: str) -> None:
    for i, (lead, n, k) in enumerate(GEMMS):
        g = torch.Generator().manual_seed(i)
        x, w = (
            torch.randn(*lead, k, generator=g).to(device),
            torch.randn(n, k, generator=g).to(device),
        )
        a, b = quantize_mxfp8(x), quantize_mxfp8(w)
        torch.testing.assert_close(
            mxfp8_matmul(a, b, impl="triton"),
            mxfp8_matmul(a, b, impl="reference"),
            atol=1e-5,
            rtol=1e-5,
        )
        for scale in ("per_token", "per_tensor"):
            mode: NVFP4Scale = scale  # type: ignore[assignment]
            p, q = quantize_nvfp4(x, scale=mode), quantize_nvfp4(w)
            torch.testing.assert_close(
                nvfp4_matmul(p, q, impl="triton"),
                nvfp4_matmul(p, q, impl="reference"),
                atol=1e-4,
                rtol=1e-4,
            )


def test_triton_quantizers_match_reference_bit_for_bit() -> None:
    check_quantizers("cpu")


def test_triton_gemms_match_reference() -> None:
    check_gemms("cpu")


def test_triton_gemm_propagates_nan_blocks() -> None:
    x = torch.randn(3, 64)
    x[1, 40] = math.nan
    a, b = quantize_mxfp8(x), quantize_mxfp8(torch.randn(5, 64))
    out = mxfp8_matmul(a, b, impl="triton")
    assert out[1].isnan().all() and not out[[0, 2]].isnan().any()


@gpu
@needs_cuda
def test_compiled_quantizers_match_reference_bit_for_bit() -> None:
    check_quantizers("cuda")


@gpu
@needs_cuda
def test_compiled_gemms_match_reference() -> None:
    check_gemms("cuda")


@pytest.mark.parametrize("impl", ["reference", "triton"])
def test_zero_tokens(impl: Implementation) -> None:
    x = torch.zeros(0, 64)
    q, n = quantize_mxfp8(x, impl=impl), quantize_nvfp4(x, impl=impl)
    assert q.codes.shape == (0, 64) and q.scales.shape == (0, 2) and n.packed.shape == (0, 32)
    assert dequantize(n, impl=impl).shape == (0, 64)
    w = quantize_mxfp8(torch.ones(3, 64))
    assert mxfp8_matmul(q, w, impl=impl).shape == (0, 3)
