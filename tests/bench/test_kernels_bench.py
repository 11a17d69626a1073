"""`opencomposer bench kernels`: every row measured on CPU, and the batch-invariance figure
that is the reason for per-token NVFP4 scales."""

import math

from opencomposer.bench.kernels import SHAPES, batch_invariance_row, kernel_rows


def test_every_kernel_row_is_measured_beside_its_baseline() -> None:
    rows, info = kernel_rows(repeat=1)
    assert info["devices"][0] == "cpu"  # type: ignore[index]
    assert len([r for r in rows if r.name.endswith(", reference")]) == len(SHAPES) * 5
    for row in rows:
        assert row.baseline and row.ours and math.isfinite(row.ours), row


def test_only_per_token_scales_code_a_row_as_when_alone() -> None:
    row = batch_invariance_row(tokens=64, hidden=64)
    assert row.ours == 100.0  # per token: every row as when quantized alone
    assert row.baseline is not None and row.baseline < 50  # per tensor: the outliers decide
