"""Our quantizers against torchao's prototype mx_formats (0.18), an independent implementation.

MXFP8: `to_mx(..., ScaleCalculationMode.FLOOR)` is OCP's floor(log2(amax)) - emax. Two
documented differences are kept out of the inputs: torchao divides by at least 2**-126 where
the scale code is 0 (we divide by the code's 2**-127, as the spec says), and it saturates
blocks holding an infinity where we mark them NaN.
NVFP4: torchao multiplies by reciprocals ((1 / g) / s) where we divide; the two agree bit for bit
when g and every block scale are powers of two, so the inputs are built that way. E2M1 rounding
alone is compared on arbitrary values through torchao's `f32_to_f4_unpacked`.
"""

import pytest
import torch
from torch import Tensor

from opencomposer.kernels import quantize_mxfp8, quantize_nvfp4
from opencomposer.kernels.float_formats import encode_e2m1

mx_tensor = pytest.importorskip(
    "torchao.prototype.mx_formats.mx_tensor", reason="torchao is not installed"
)
from torchao.prototype.mx_formats import nvfp4_tensor  # noqa: E402
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402
from torchao.prototype.mx_formats.kernels import f32_to_f4_unpacked  # noqa: E402


def binades(rows: int, k: int, seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=g) * torch.logspace(-30, 30, k, base=2.0)
    x[0, :32] = 0.0  # an all-zero block: scale code 0 in both
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mxfp8_matches_torchao_floor_mode(dtype: torch.dtype) -> None:
    x = binades(9, 256, 0).to(dtype)
    scale, data = mx_tensor.to_mx(x, torch.float8_e4m3fn, 32, ScaleCalculationMode.FLOOR)
    ours = quantize_mxfp8(x)
    assert torch.equal(ours.scales, scale.view(torch.uint8).reshape(ours.scales.shape))
    assert torch.equal(ours.codes, data.view(torch.uint8))


def test_e2m1_rounding_matches_torchao() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.cat(
        [
            torch.randn(4096, generator=g) * 4,
            torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, 1e9]),
        ]
    )
    x = torch.cat([x, -x])
    assert torch.equal(encode_e2m1(x), f32_to_f4_unpacked(x))


def test_nvfp4_matches_torchao_on_power_of_two_scales() -> None:
    g = torch.Generator().manual_seed(2)
    rows, k = 4, 128
    # Each block's amax 6 * g * 2**j puts its E4M3 scale at exactly 2**j, the other elements
    # are arbitrary below it. Block 0 holds the tensor's amax 2688 * g, g = 2**-3: its scale is
    # 448, so its elements are E2M1 grid points times 448 * g, which both methods hit exactly.
    x = torch.rand(rows, k, generator=g) * 2 - 1
    blocks = x.view(rows, k // 16, 16)
    j = torch.randint(-6, 9, (rows, k // 16), generator=g)
    top = 6 * 2.0**-3 * torch.pow(2.0, j.float())
    blocks *= top.unsqueeze(-1)
    blocks[..., 0] = top
    grid = torch.tensor([6.0, -6, 4, -4, 3, -3, 2, -2, 1.5, -1.5, 1, -1, 0.5, -0.5, 0, 6])
    blocks[0, 0] = grid * 448 * 2.0**-3
    per_tensor = nvfp4_tensor.per_tensor_amax_to_scale(x.abs().amax())
    scales, packed = nvfp4_tensor.nvfp4_quantize(x, 16, per_tensor)
    ours = quantize_nvfp4(x, scale="per_tensor")
    assert ours.global_scale.tolist() == [2.0**-3] == [per_tensor.item()]
    assert torch.equal(ours.block_scales, scales.view(torch.uint8).reshape(ours.block_scales.shape))
    assert torch.equal(ours.packed, packed.reshape(ours.packed.shape))
