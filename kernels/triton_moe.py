"""Triton copies of the MoE reference steps in `moe.py`; the only module that imports triton.

The layout is the reference's: (token, slot) pairs sorted by expert, each expert's rows one
contiguous run starting at its offset (the exclusive cumsum of the counts). The grouped GEMM
is SGLang's fused_moe idea without the padding: one program per (expert, row tile, column
tile) reads its expert's start and count, so a tile never mixes experts and empty experts
cost one masked-out program per tile. Unpermute sums each token's k slots in slot order in
float32, one program per (token, column block), so the result is deterministic.

The expert order itself (a stable argsort) stays torch's on both paths: it is index
bookkeeping, not arithmetic, and torch's sort is already a GPU kernel.
"""

import torch
import triton
import triton.language as tl
from torch import Tensor

# Tile sizes: tl.dot needs every dimension >= 16. 64x64x32 is the usual bf16 starting point
# on Hopper (SGLang's default fused_moe config); the interpreter runs the smallest tiles
# fastest, since it executes every lane in numpy.
_GEMM_TILES = {"cuda": (64, 64, 32), "cpu": (16, 16, 16)}
_COLUMN_BLOCK = {"cuda": 256, "cpu": 64}


@triton.jit
def _histogram_kernel(ids_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ids = tl.load(ids_ptr + offs, mask=mask, other=0)
    tl.atomic_add(counts_ptr + ids, tl.full((BLOCK,), 1, tl.int64), mask=mask)


@triton.jit
def _exclusive_cumsum_kernel(counts_ptr, offsets_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    counts = tl.load(counts_ptr + offs, mask=offs < n, other=0)
    tl.store(offsets_ptr + offs, tl.cumsum(counts, axis=0) - counts, mask=offs < n)


@triton.jit
def _gather_rows_kernel(x_ptr, order_ptr, out_ptr, d, top_k, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    token = tl.load(order_ptr + row) // top_k
    values = tl.load(x_ptr + token * d + cols, mask=cols < d)
    tl.store(out_ptr + row * d + cols, values, mask=cols < d)


@triton.jit
def _grouped_gemm_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    offsets_ptr,
    counts_ptr,
    n_out,
    n_in,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    expert = tl.program_id(0)
    start = tl.load(offsets_ptr + expert)
    count = tl.load(counts_ptr + expert)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < count
    col_ok = cols < n_out
    w_base = w_ptr + expert.to(tl.int64) * n_out * n_in
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, n_in, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < n_in
        a = tl.load(
            x_ptr + (start + rows)[:, None] * n_in + ks[None, :],
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        # w is [E, out, in] (nn.Linear layout): the [K, N] tile is read transposed.
        b = tl.load(
            w_base + cols[None, :] * n_in + ks[:, None],
            mask=k_ok[:, None] & col_ok[None, :],
            other=0.0,
        )
        if UPCAST:
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc += tl.dot(a, b)
    tl.store(
        out_ptr + (start + rows)[:, None] * n_out + cols[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & col_ok[None, :],
    )


@triton.jit
def _unpermute_kernel(
    y_sorted_ptr, position_ptr, weights_ptr, out_ptr, d, top_k, BLOCK: tl.constexpr
):
    token = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for slot in range(top_k):
        row = tl.load(position_ptr + token * top_k + slot)
        weight = tl.load(weights_ptr + token * top_k + slot).to(tl.float32)
        values = tl.load(y_sorted_ptr + row * d + cols, mask=cols < d, other=0.0)
        acc += weight * values.to(tl.float32)
    tl.store(out_ptr + token * d + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < d)


def _kind(t: Tensor) -> str:
    return "cuda" if t.is_cuda else "cpu"


def expert_counts(ids: Tensor, num_experts: int) -> Tensor:
    flat = ids.reshape(-1).contiguous()
    counts = torch.zeros(num_experts, dtype=torch.int64, device=ids.device)
    block = 1024
    _histogram_kernel[(triton.cdiv(flat.numel(), block),)](flat, counts, flat.numel(), BLOCK=block)
    return counts


def expert_offsets(counts: Tensor) -> Tensor:
    offsets = torch.empty_like(counts)
    block = triton.next_power_of_2(max(counts.numel(), 1))
    _exclusive_cumsum_kernel[(1,)](counts, offsets, counts.numel(), BLOCK=block)
    return offsets


def permute_tokens(x: Tensor, order: Tensor, top_k: int) -> Tensor:
    x = x.contiguous()
    out = x.new_empty(order.numel(), x.shape[1])
    block = _COLUMN_BLOCK[_kind(x)]
    grid = (order.numel(), triton.cdiv(x.shape[1], block))
    _gather_rows_kernel[grid](x, order.contiguous(), out, x.shape[1], top_k, BLOCK=block)
    return out


def grouped_gemm(x_sorted: Tensor, w: Tensor, counts: Tensor) -> Tensor:
    x_sorted, w = x_sorted.contiguous(), w.contiguous()
    num_experts, n_out, n_in = w.shape
    out = x_sorted.new_empty(x_sorted.shape[0], n_out)
    if not x_sorted.shape[0]:
        return out
    block_m, block_n, block_k = _GEMM_TILES[_kind(x_sorted)]
    # The longest run sizes the row-tile axis (one host sync); shorter experts mask out.
    longest = int(counts.max())
    grid = (num_experts, triton.cdiv(longest, block_m), triton.cdiv(n_out, block_n))
    _grouped_gemm_kernel[grid](
        x_sorted,
        w,
        out,
        expert_offsets(counts),
        counts,
        n_out,
        n_in,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        # Triton 3.x's interpreter computes tl.dot of bfloat16 tiles wrongly (garbage of
        # order 1e10); float32 tiles hold bf16 values exactly, and the sum is float32 anyway.
        UPCAST=not x_sorted.is_cuda,
    )
    return out


def unpermute(y_sorted: Tensor, order: Tensor, weights: Tensor) -> Tensor:
    num_tokens, top_k = weights.shape
    position = torch.empty_like(order)
    position[order] = torch.arange(order.numel(), device=order.device)
    y_sorted = y_sorted.contiguous()
    d = y_sorted.shape[1]
    out = y_sorted.new_empty(num_tokens, d)
    block = _COLUMN_BLOCK[_kind(y_sorted)]
    _unpermute_kernel[(num_tokens, triton.cdiv(d, block))](
        y_sorted, position, weights.contiguous(), out, d, top_k, BLOCK=block
    )
    return out
