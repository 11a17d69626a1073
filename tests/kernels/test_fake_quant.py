"""Fake-quantized linear layers: each GEMM sees its operands rounded through the recipe's format
along its reduction dimension, gradients pass straight through the rounding, and a small
model trained this way tracks bf16."""

import pytest
import torch
import torch.nn.functional as F

from opencomposer.bench.low_precision import RECIPES, TrainingConfig, final_losses
from opencomposer.kernels import dequantize, quantize_mxfp8, quantize_nvfp4
from opencomposer.kernels.fake_quant import FakeQuantLinear, QuantRecipe, fake_quantize


def test_bf16_recipe_is_a_bf16_rounded_linear() -> None:
    torch.manual_seed(0)
    layer = FakeQuantLinear(48, 24, recipe=QuantRecipe(forward="bf16", backward="bf16"))
    x = torch.randn(5, 48)
    expected = F.linear(x.bfloat16().float(), layer.weight.bfloat16().float(), layer.bias)
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=0)


def test_nvfp4_forward_multiplies_the_dequantized_operands() -> None:
    torch.manual_seed(1)
    layer = FakeQuantLinear(64, 32, bias=False)
    x = torch.randn(2, 3, 64)
    rows = x.reshape(-1, 64)
    expected = dequantize(quantize_nvfp4(rows)) @ dequantize(quantize_nvfp4(layer.weight)).T
    torch.testing.assert_close(layer(x), expected.reshape(2, 3, 32), rtol=0, atol=0)


def test_a_reduction_that_is_not_a_whole_block_is_padded_with_zeros() -> None:
    x = torch.randn(4, 40)  # 40 = 2.5 NVFP4 blocks, 1.25 MXFP8 blocks
    for fmt, quantize in (("nvfp4", quantize_nvfp4), ("mxfp8", quantize_mxfp8)):
        padded = torch.cat([x, torch.zeros(4, 24)], dim=1)
        expected = dequantize(quantize(padded))[:, :40]
        got = fake_quantize(x, fmt, recipe=QuantRecipe())  # type: ignore[arg-type]
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_gradients_use_mxfp8_operands_along_each_reduction() -> None:
    torch.manual_seed(2)
    layer = FakeQuantLinear(64, 32, bias=False)
    x = torch.randn(32, 64, requires_grad=True)
    grad_out = torch.randn(32, 32)
    layer(x).backward(grad_out)

    def mx(t: torch.Tensor) -> torch.Tensor:  # blocks along the last dimension
        return dequantize(quantize_mxfp8(t))

    expected_dx = mx(grad_out) @ mx(layer.weight.detach().T).T
    expected_dw = mx(grad_out.T) @ mx(x.detach().T).T
    torch.testing.assert_close(x.grad, expected_dx, rtol=0, atol=0)
    torch.testing.assert_close(layer.weight.grad, expected_dw, rtol=0, atol=0)
    # Straight through: close to the exact gradients (MXFP8 keeps ~3 significant bits).
    exact_dx = grad_out @ layer.weight.detach()
    assert (x.grad - exact_dx).norm() / exact_dx.norm() < 0.1


def test_from_linear_shares_the_parameters() -> None:
    linear = torch.nn.Linear(32, 16)
    layer = FakeQuantLinear.from_linear(linear, QuantRecipe(forward="mxfp8"))
    assert layer.weight is linear.weight and layer.bias is linear.bias
    assert "forward=mxfp8" in repr(layer)


@pytest.mark.slow
def test_fake_quant_training_tracks_bf16() -> None:
    config = TrainingConfig(steps=120, batch=32, hidden=128, corpus_bytes=300_000, tail=30)
    losses = final_losses(
        config, {k: RECIPES[k] for k in ("bf16", "nvfp4 per-token fwd, mxfp8 bwd")}
    )
    bf16, nvfp4 = losses.values()
    assert bf16 < 4.0  # it learned (a uniform guess over bytes is ln 256 = 5.55)
    # Stated tolerance: within 5% of bf16's final loss at this size.
    assert abs(nvfp4 / bf16 - 1) < 0.05, losses
