"""The quantized-matmul references: nn.Linear layout, leading dimensions, and what they refuse."""

import subprocess
import sys

import pytest
import torch

from opencomposer.kernels import (
    dequantize,
    mxfp8_matmul,
    nvfp4_matmul,
    quantize_mxfp8,
    quantize_nvfp4,
)


def test_reference_is_linear_of_the_dequantized_operands() -> None:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(3, 5, 64, generator=g), torch.randn(7, 64, generator=g)
    for quantize, matmul in ((quantize_mxfp8, mxfp8_matmul), (quantize_nvfp4, nvfp4_matmul)):
        a, b = quantize(x), quantize(w)
        out = matmul(a, b)
        assert out.shape == (3, 5, 7) and out.dtype == torch.float32
        expected = torch.nn.functional.linear(dequantize(a), dequantize(b))
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    # Quantization error, not a layout mistake: MXFP8 keeps the product within a few percent.
    rel = (mxfp8_matmul(quantize_mxfp8(x), quantize_mxfp8(w)) - x @ w.T).norm() / (x @ w.T).norm()
    assert rel < 0.05


def test_mismatched_operands_raise() -> None:
    a = quantize_mxfp8(torch.randn(4, 64))
    with pytest.raises(ValueError, match="K = 64"):
        mxfp8_matmul(a, quantize_mxfp8(torch.randn(4, 32)))
    with pytest.raises(ValueError, match="block"):
        mxfp8_matmul(a, quantize_mxfp8(torch.randn(4, 64), block=16))
    with pytest.raises(ValueError, match=r"\[N, K\]"):
        nvfp4_matmul(quantize_nvfp4(torch.randn(4, 64)), quantize_nvfp4(torch.randn(2, 4, 64)))


def test_the_package_imports_without_triton() -> None:
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch, opencomposer.kernels as k\n"
        "q = k.quantize_nvfp4(torch.ones(2, 16), impl='triton')\n"  # CPU: the reference
        "print(k.dequantize(q).sum().item())"
    )
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "32.0"
