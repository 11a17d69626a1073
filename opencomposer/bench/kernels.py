"""`opencomposer bench kernels`: each kernel beside the torch operation it is judged against,
at the expert shapes of tiny-moe and of DeepSeek-V3 scaled down, plus low-precision training
in miniature.

- Quantizers (MXFP8, NVFP4 per token): the bytes they move (the input read, codes and
  scales written) per second, beside a plain float32 copy of the same tensor — the memory
  bandwidth this machine reaches, which a quantizer at its best matches.
- Quantized GEMMs (dequantize, then multiply): beside a float32 GEMM of the same shape on CPU
  and bf16 (and `torch._scaled_mm`'s FP8, where the device has it) on GPU.
- MoE experts (permute, grouped SwiGLU GEMMs, weighted unpermute): beside one dense GEMM of
  the same FLOPs, the ceiling a grouped GEMM approaches.

The reference always runs (the CPU figures); the Triton kernels run where a GPU is, and
their rows say so. Timings are medians of `repeat` runs after a warm-up; on a shared machine
compare the ratios of one run, not figures across runs.
"""

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from opencomposer.bench.low_precision import TrainingConfig, final_losses
from opencomposer.bench.rows import Row
from opencomposer.kernels import (
    moe_experts,
    mxfp8_matmul,
    nvfp4_matmul,
    quantize_mxfp8,
    quantize_nvfp4,
)
from opencomposer.kernels.implementation import Implementation
from opencomposer.kernels.quantize import NVFP4Scale


@dataclass(frozen=True)
class ExpertShape:
    name: str
    tokens: int
    hidden: int
    intermediate: int
    experts: int
    top_k: int


SHAPES = (
    ExpertShape("tiny-moe", tokens=256, hidden=256, intermediate=128, experts=16, top_k=4),
    # DeepSeek-V3 (7168 hidden, 2048 per expert, 256 experts, top 8), hidden sizes / 8 and
    # experts / 8, so that a CPU run takes seconds.
    ExpertShape("deepseek-v3 / 8", tokens=512, hidden=896, intermediate=256, experts=32, top_k=8),
)


def seconds(run: Callable[[], object], device: torch.device, repeat: int) -> float:
    """Median wall time of `run` after one warm-up, synchronized on CUDA."""

    def once() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - started

    once()
    return statistics.median(once() for _ in range(repeat))


def _quantizer_rows(
    shape: ExpertShape, device: torch.device, impl: Implementation, repeat: int
) -> list[Row]:
    x = torch.randn(shape.tokens, shape.hidden, device=device)
    copy_target = torch.empty_like(x)
    copy = seconds(lambda: copy_target.copy_(x), device, repeat)
    copy_rate = 2 * x.numel() * 4 / copy / 1e9  # read + write
    rows = []
    for name, quantize, written in (
        # codes (1 B per value) + E8M0 scales (1 B per 32)
        ("MXFP8", lambda: quantize_mxfp8(x, impl=impl), x.numel() * (1 + 1 / 32)),
        # codes (½ B per value) + E4M3 scales (1 B per 16) + an FP32 scale per token
        (
            "NVFP4",
            lambda: quantize_nvfp4(x, impl=impl),
            x.numel() * (0.5 + 1 / 16) + shape.tokens * 4,
        ),
    ):
        took = seconds(quantize, device, repeat)
        rows.append(
            Row(
                f"quantize {name} [{shape.tokens}x{shape.hidden}], {shape.name}, {impl}",
                "float32 copy",
                copy_rate,
                (x.numel() * 4 + written) / took / 1e9,
                "GB/s",
                note="bytes moved per second",
            )
        )
    return rows


def _gemm_rows(
    shape: ExpertShape, device: torch.device, impl: Implementation, repeat: int
) -> list[Row]:
    a = torch.randn(shape.tokens, shape.hidden, device=device)
    b = torch.randn(shape.intermediate, shape.hidden, device=device)
    flops = 2 * shape.tokens * shape.hidden * shape.intermediate
    if device.type == "cuda":
        a16, b16 = a.bfloat16(), b.bfloat16()
        baseline_label, baseline = "torch bf16 GEMM", seconds(lambda: a16 @ b16.T, device, repeat)
    else:
        baseline_label, baseline = "torch float32 GEMM", seconds(lambda: a @ b.T, device, repeat)
    rows = []
    qa8, qb8 = quantize_mxfp8(a), quantize_mxfp8(b)
    qa4, qb4 = quantize_nvfp4(a), quantize_nvfp4(b)
    for name, matmul in (
        ("MXFP8", lambda: mxfp8_matmul(qa8, qb8, impl=impl)),
        ("NVFP4", lambda: nvfp4_matmul(qa4, qb4, impl=impl)),
    ):
        took = seconds(matmul, device, repeat)
        rows.append(
            Row(
                f"{name} GEMM [{shape.tokens}x{shape.hidden}]·[{shape.hidden}x"
                f"{shape.intermediate}], {shape.name}, {impl}",
                baseline_label,
                flops / baseline / 1e9,
                flops / took / 1e9,
                "GFLOP/s",
            )
        )
    if device.type == "cuda":
        scaled = _scaled_mm_seconds(a, b, repeat)
        rows.append(
            Row(
                f"MXFP8 GEMM beside FP8 per-tensor, {shape.name}, {impl}",
                "torch._scaled_mm FP8",
                None if scaled is None else flops / scaled / 1e9,
                rows[0].ours,
                "GFLOP/s",
                note="" if scaled is not None else "torch._scaled_mm does not run on this GPU",
            )
        )
    return rows


def _scaled_mm_seconds(a: Tensor, b: Tensor, repeat: int) -> float | None:
    """torch's own FP8 GEMM (one scale per tensor), where the GPU has FP8 tensor cores."""
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device=a.device)
    try:
        return seconds(
            lambda: torch._scaled_mm(a8, b8.T, one, one, out_dtype=torch.bfloat16),
            a.device,
            repeat,
        )
    except RuntimeError:
        return None


def _moe_row(shape: ExpertShape, device: torch.device, impl: Implementation, repeat: int) -> Row:
    generator = torch.Generator().manual_seed(0)

    def weights(*size: int) -> Tensor:
        return (torch.randn(*size, generator=generator) / size[-1] ** 0.5).to(device)

    x = weights(shape.tokens, shape.hidden)
    w_gate = weights(shape.experts, shape.intermediate, shape.hidden)
    w_up = weights(shape.experts, shape.intermediate, shape.hidden)
    w_down = weights(shape.experts, shape.hidden, shape.intermediate)
    ids = torch.rand(shape.tokens, shape.experts, generator=generator).topk(shape.top_k)[1]
    gate = torch.softmax(torch.randn(shape.tokens, shape.top_k, generator=generator), -1)
    ids, gate = ids.to(device), gate.to(device)
    took = seconds(
        lambda: moe_experts(x, ids, gate, w_gate, w_up, w_down, impl=impl), device, repeat
    )
    # The same FLOPs as one dense SwiGLU over tokens·top_k rows.
    rows = x.repeat(shape.top_k, 1)

    def dense() -> Tensor:
        hidden = torch.nn.functional.silu(rows @ w_gate[0].T) * (rows @ w_up[0].T)
        return hidden @ w_down[0].T

    baseline = seconds(dense, device, repeat)
    flops = 3 * 2 * shape.tokens * shape.top_k * shape.hidden * shape.intermediate
    return Row(
        f"MoE experts ({shape.experts} experts, top {shape.top_k}, {shape.tokens} tokens), "
        f"{shape.name}, {impl}",
        "one dense GEMM, same FLOPs",
        flops / baseline / 1e9,
        flops / took / 1e9,
        "GFLOP/s",
    )


def kernel_rows(repeat: int = 5) -> tuple[list[Row], dict[str, object]]:
    """The kernels' rows: the reference on CPU always, the Triton kernels on CUDA if present."""
    targets: list[tuple[torch.device, Implementation]] = [(torch.device("cpu"), "reference")]
    if torch.cuda.is_available():
        targets.append((torch.device("cuda"), "triton"))
    rows: list[Row] = []
    for device, impl in targets:
        for shape in SHAPES:
            rows += _quantizer_rows(shape, device, impl, repeat)
            rows += _gemm_rows(shape, device, impl, repeat)
            rows.append(_moe_row(shape, device, impl, repeat))
    rows.append(batch_invariance_row())
    info: dict[str, object] = {
        "devices": [str(d) for d, _ in targets],
        "threads": torch.get_num_threads(),
    }
    if not torch.cuda.is_available():
        info["triton"] = "not timed: no CUDA device (the interpreter's CPU timings mean nothing)"
    return rows, info


def batch_invariance_row(tokens: int = 256, hidden: int = 1024) -> Row:
    """How many rows of a batch quantize to NVFP4 exactly as they do alone: the property the
    report moved to per-token scales for (a per-tensor scale lets one token's outlier change
    every other token's codes, so a token's numerics depend on its batch). Activations with a
    few outlier tokens, as real ones have."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=generator)
    x[:: tokens // 8] *= 40  # one token in 32 with a large activation

    def same_alone(scale: NVFP4Scale) -> float:
        batch = quantize_nvfp4(x, scale=scale)
        same = 0
        for i in range(tokens):
            alone = quantize_nvfp4(x[i : i + 1], scale=scale)
            same += bool(
                torch.equal(alone.packed[0], batch.packed[i])
                and torch.equal(alone.block_scales[0], batch.block_scales[i])
            )
        return 100 * same / tokens

    return Row(
        f"NVFP4 rows coded as when alone, {tokens} tokens with outliers",
        "per-tensor scale",
        same_alone("per_tensor"),
        same_alone("per_token"),
        "%",
    )


def training_rows(config: TrainingConfig) -> list[Row]:
    """Each recipe's final loss beside bf16's, trained on the same data from the same seed."""
    losses = final_losses(config)
    bf16 = losses.pop("bf16")
    return [
        Row(f"final loss, {name} ({config.steps} steps)", "bf16", bf16, loss, "nats")
        for name, loss in losses.items()
    ]
