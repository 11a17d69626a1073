"""Fake-quantized linear layers: the low-precision recipe of the report, simulated in float32.

Each GEMM of a linear layer sees its operands the way the real low-precision kernel would:
quantized along the GEMM's reduction dimension (the dimension a block-scaled MMA shares a
scale over), then dequantized, then multiplied in float32 — so the numerics are the format's
while the arithmetic is torch's. The report's recipe is NVFP4 forward (matching inference)
and MXFP8 backward (trainer only, more precision):

    forward   y  = Q_fwd(x) · Q_fwd(W)ᵀ        reduced over in_features
    dgrad     dx = Q_bwd(dy) · Q_bwd(W)        reduced over out_features
    wgrad     dW = Q_bwd(dy)ᵀ · Q_bwd(x)       reduced over tokens

The quantizers' own gradient is the straight-through estimator: each GEMM's backward uses the
quantized operands as if the rounding were the identity. `bf16` in either direction means the
operands are rounded to bfloat16 instead (the baseline the report compares against). A
reduction dimension that is not a multiple of the format's block is zero-padded (zeros
change neither a block's scale nor the products).
"""

from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from opencomposer.kernels.implementation import Implementation
from opencomposer.kernels.quantize import (
    MXFP8Tensor,
    NVFP4Scale,
    NVFP4Tensor,
    dequantize,
    quantize_mxfp8,
    quantize_nvfp4,
    quantize_nvfp4_reference,
)

ForwardFormat = Literal["nvfp4", "mxfp8", "bf16"]
BackwardFormat = Literal["mxfp8", "bf16"]

_BLOCK = {"nvfp4": 16, "mxfp8": 32}


@dataclass(frozen=True)
class QuantRecipe:
    """How the GEMMs of a `FakeQuantLinear` are quantized. The default is the report's."""

    forward: ForwardFormat = "nvfp4"
    backward: BackwardFormat = "mxfp8"
    nvfp4_scale: NVFP4Scale = "per_token"
    """The NVFP4 FP32 scale: one per row (token) or one for the whole operand."""

    nvfp4_division: Literal["ieee", "reciprocal"] = "ieee"
    """`reciprocal`: the approximate division the report saw diverge (reference only)."""

    impl: Implementation | None = None


def fake_quantize(
    x: Tensor, fmt: ForwardFormat | BackwardFormat, *, dim: int = -1, recipe: QuantRecipe
) -> Tensor:
    """`x` rounded through `fmt`, with blocks along `dim`, back in float32."""
    if fmt == "bf16":
        return x.to(torch.bfloat16).float()
    moved = x.float().movedim(dim, -1)
    length = moved.shape[-1]
    padded = F.pad(moved, (0, -length % _BLOCK[fmt]))
    quantized: MXFP8Tensor | NVFP4Tensor
    if fmt == "nvfp4" and recipe.nvfp4_division == "reciprocal":
        quantized = quantize_nvfp4_reference(
            padded, scale=recipe.nvfp4_scale, division="reciprocal"
        )
    elif fmt == "nvfp4":
        quantized = quantize_nvfp4(padded, scale=recipe.nvfp4_scale, impl=recipe.impl)
    else:
        quantized = quantize_mxfp8(padded, impl=recipe.impl)
    return dequantize(quantized, impl=recipe.impl)[..., :length].movedim(-1, dim)


class _FakeQuantMatmul(torch.autograd.Function):
    """x [M, K] · W [N, K]ᵀ with each GEMM's operands fake-quantized along its reduction."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, recipe: QuantRecipe) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.recipe = recipe
        fmt = recipe.forward
        return fake_quantize(x, fmt, recipe=recipe) @ fake_quantize(weight, fmt, recipe=recipe).T

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        x, weight = ctx.saved_tensors
        recipe: QuantRecipe = ctx.recipe
        fmt = recipe.backward
        grad_x = grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_x = fake_quantize(grad_out, fmt, recipe=recipe) @ fake_quantize(
                weight, fmt, dim=0, recipe=recipe
            )
        if ctx.needs_input_grad[1]:
            grad_weight = fake_quantize(grad_out, fmt, dim=0, recipe=recipe).T @ fake_quantize(
                x, fmt, dim=0, recipe=recipe
            )
        return grad_x, grad_weight, None


class FakeQuantLinear(nn.Linear):
    """An `nn.Linear` whose GEMMs run through `recipe` (weights stay float32: the master copy
    an optimizer updates, as in mixed-precision training). Any leading shape of input."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        recipe: QuantRecipe | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device)
        self.recipe = recipe or QuantRecipe()

    @classmethod
    def from_linear(cls, linear: nn.Linear, recipe: QuantRecipe | None = None) -> "FakeQuantLinear":
        """The same layer (sharing its parameters) with its GEMMs fake-quantized."""
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer.in_features, layer.out_features = linear.in_features, linear.out_features
        layer.weight, layer.bias = linear.weight, linear.bias
        layer.recipe = recipe or QuantRecipe()
        return layer

    def forward(self, x: Tensor) -> Tensor:
        rows = x.reshape(-1, self.in_features)
        y = _FakeQuantMatmul.apply(rows, self.weight, self.recipe)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        r = self.recipe
        return f"{super().extra_repr()}, forward={r.forward}, backward={r.backward}"
