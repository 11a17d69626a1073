"""Linear layers packed for speculative verification: the same products as before, the same
parameters under the same names, repacked after a weight update, lossless speculation."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from support.llama_mtp import write_llama_checkpoint
from torch import nn

from opencomposer.serving.engines.embedded.engine import LLMEngine
from opencomposer.serving.engines.embedded.loader import load_model
from opencomposer.serving.engines.embedded.packed_linear import (
    PackedLinear,
    pack_linears,
    packing_available,
)
from opencomposer.serving.engines.embedded.sequence import SamplingOptions

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch has no MKL packing")


@pytest.mark.parametrize("bias", [True, False])
def test_every_row_count_gives_the_linear_product(bias: bool) -> None:
    torch.manual_seed(0)
    linear = nn.Linear(48, 80, bias=bias)
    packed = PackedLinear.of(linear, rows=4)
    with torch.inference_mode():
        for rows in (1, 3, 4, 5):
            x = torch.randn(rows, 48)
            torch.testing.assert_close(packed(x), F.linear(x, linear.weight, linear.bias))
        x = torch.randn(2, 2, 48)  # 4 rows in any shape take the packed path
        torch.testing.assert_close(packed(x), F.linear(x, linear.weight, linear.bias))


def test_a_weight_updated_in_place_is_repacked() -> None:
    torch.manual_seed(1)
    linear = nn.Linear(16, 8, bias=False)
    packed = PackedLinear.of(linear, rows=2)
    x = torch.randn(2, 16)
    with torch.inference_mode():
        before = packed(x)
    with torch.no_grad():
        linear.weight.mul_(2)
    with torch.inference_mode():
        torch.testing.assert_close(packed(x), 2 * before)


def test_gradients_flow_through_the_plain_path() -> None:
    linear = nn.Linear(8, 4)
    packed = PackedLinear.of(linear, rows=3)
    packed(torch.randn(3, 8)).sum().backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0


def test_packing_a_model_keeps_its_parameters_and_speculation_lossless(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    write_llama_checkpoint(tmp_path, mtp=True)
    plain = load_model(tmp_path, mtp=False)
    model = load_model(tmp_path)
    before = dict(model.named_parameters())
    assert pack_linears(model, rows=3) == len(
        [m for m in model.modules() if type(m) is PackedLinear]
    )
    after = dict(model.named_parameters())
    assert list(after) == list(before) and all(after[n] is before[n] for n in before)
    packed = [m for m in model.modules() if type(m) is PackedLinear]
    packs = [m._pack for m in packed]
    assert all(pack is not None for pack in packs)  # packed now, not in a later (timed) forward
    pack_linears(model, rows=3)
    assert all(m._pack is pack for m, pack in zip(packed, packs, strict=True))  # kept
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied
    prompts = [[5, 9, 2, 77], [1, 2, 3]]
    expected = LLMEngine(plain).generate(prompts, SamplingOptions(max_tokens=24))
    drafted = LLMEngine(model).generate(prompts, SamplingOptions(max_tokens=24, draft_tokens=2))
    assert [s.output_ids for s in drafted] == [s.output_ids for s in expected]
    assert pack_linears(model, rows=4) > 0  # repacked for another count, not wrapped twice
    assert all(type(m) is not nn.Linear for m in model.modules())
    assert pack_linears(model, rows=0) == len(packed)
    assert all(m._pack is None for m in packed)  # 0 drops the packs
