"""The Triton MoE kernels against the PyTorch reference, on CPU through Triton's interpreter
and (marked gpu) on CUDA.

Tolerances (Triton vs reference, same inputs):

| comparison                         | atol / rtol | why                                      |
|------------------------------------|-------------|------------------------------------------|
| counts, offsets, permute_tokens    | exact       | integer bookkeeping and row copies       |
| unpermute (float32)                | exact       | same k products summed in slot order     |
| grouped_gemm, moe_experts float32  | 1e-5 / 1e-5 | tl.dot's K blocking vs torch's matmul;   |
|                                    |             | on CUDA tl.dot may use TF32: 2e-2        |
| moe_experts bfloat16               | 2e-2 / 2e-2 | bf16 rounding of the intermediates at    |
|                                    |             | different points (~3 bf16 ulps)          |
"""

import os

import pytest
import torch
from support.moe_cases import random_experts

from opencomposer.kernels.moe import (
    expert_offsets,
    grouped_gemm,
    moe_experts,
    permute,
    permute_tokens,
    unpermute,
)

# Triton reads this when it is first imported; tests/conftest.py sets it before anything can
# import triton, this line keeps the module runnable on its own (on CUDA the real kernels run).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

triton = pytest.importorskip("triton")
INTERPRETED = not torch.cuda.is_available() and triton.knobs.runtime.interpret

DEVICES = [
    pytest.param("cpu", id="interpreter"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
        ],
    ),
]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    if request.param == "cpu" and not INTERPRETED:
        pytest.skip("Triton's interpreter is off (TRITON_INTERPRET is set, not to 1)")
    return torch.device(request.param)


def tolerance(device: torch.device, dtype: torch.dtype) -> dict[str, float]:
    if dtype == torch.bfloat16:
        return {"atol": 2e-2, "rtol": 2e-2}
    return {"atol": 2e-2, "rtol": 2e-2} if device.type == "cuda" else {"atol": 1e-5, "rtol": 1e-5}


SHAPES = [
    # (tokens, d, f, experts, top_k)
    pytest.param(6, 32, 16, 4, 2, id="typical"),
    pytest.param(1, 16, 16, 4, 2, id="one-token"),
    pytest.param(5, 33, 47, 6, 2, id="odd-d33-f47"),
    pytest.param(3, 17, 9, 12, 2, id="mostly-empty-experts"),
    pytest.param(3, 16, 16, 4, 4, id="top_k-equals-experts"),
    pytest.param(20, 16, 16, 3, 1, id="rows-span-two-tiles"),
]


@pytest.mark.parametrize(("tokens", "d", "f", "experts", "top_k"), SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_moe_experts_matches_reference(
    device: torch.device,
    dtype: torch.dtype,
    tokens: int,
    d: int,
    f: int,
    experts: int,
    top_k: int,
) -> None:
    x, ids, weights, *w = random_experts(
        tokens, d, f, experts, top_k, seed=tokens * d + f, device=device
    )
    args = (x.to(dtype), ids, weights, *(t.to(dtype) for t in w))
    got = moe_experts(*args, impl="triton")
    want = moe_experts(*args, impl="reference")
    assert got.dtype == dtype
    torch.testing.assert_close(got.float(), want.float(), **tolerance(device, dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_all_tokens_to_one_expert(device: torch.device, dtype: torch.dtype) -> None:
    x, _, _, *w = random_experts(19, 24, 20, 5, 1, seed=2, device=device)
    ids = torch.full((19, 1), 3, device=device)
    weights = torch.ones(19, 1, device=device)
    args = (x.to(dtype), ids, weights, *(t.to(dtype) for t in w))
    torch.testing.assert_close(
        moe_experts(*args, impl="triton").float(),
        moe_experts(*args, impl="reference").float(),
        **tolerance(device, dtype),
    )


def test_counts_and_offsets_with_empty_experts(device: torch.device) -> None:
    ids = torch.tensor([[3, 0], [0, 2], [3, 3]], device=device)
    order, counts = permute(ids, 6, impl="triton")
    assert counts.tolist() == [2, 0, 1, 3, 0, 0]
    assert order.tolist() == [1, 2, 3, 0, 4, 5]
    assert expert_offsets(counts, impl="triton").tolist() == [0, 2, 2, 3, 6, 6]
    assert torch.equal(expert_offsets(counts, impl="reference"), expert_offsets(counts))


def test_permute_then_unpermute_with_unit_weights_is_the_identity(device: torch.device) -> None:
    x, ids, *_ = random_experts(9, 33, 16, 5, 1, seed=7, device=device)
    order, _ = permute(ids, 5, impl="triton")
    x_sorted = permute_tokens(x, order, 1, impl="triton")
    assert torch.equal(x_sorted, permute_tokens(x, order, 1, impl="reference"))
    ones = torch.ones(9, 1, device=device)
    assert torch.equal(unpermute(x_sorted, order, ones, impl="triton"), x)


def test_unpermute_sums_the_slots_like_the_reference(device: torch.device) -> None:
    _, ids, weights, *_ = random_experts(7, 8, 8, 6, 3, seed=8, device=device)
    order, _ = permute(ids, 6)
    y_sorted = torch.randn(21, 40, generator=torch.Generator().manual_seed(9)).to(device)
    torch.testing.assert_close(
        unpermute(y_sorted, order, weights, impl="triton"),
        unpermute(y_sorted, order, weights, impl="reference"),
        atol=0,
        rtol=0,
    )


def test_grouped_gemm_with_empty_experts_and_no_rows(device: torch.device) -> None:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(4, 47, 33, generator=gen).to(device)
    x = torch.randn(6, 33, generator=gen).to(device)
    counts = torch.tensor([2, 0, 4, 0], device=device)
    torch.testing.assert_close(
        grouped_gemm(x, w, counts, impl="triton"),
        grouped_gemm(x, w, counts, impl="reference"),
        **tolerance(device, torch.float32),
    )
    empty = grouped_gemm(x[:0], w, torch.zeros(4, dtype=torch.int64, device=device), impl="triton")
    assert empty.shape == (0, 47)
