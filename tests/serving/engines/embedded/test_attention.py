"""Paged attention: short runs attended together, padded, give what each run gives alone."""

import pytest
import torch

from opencomposer.serving.engines.embedded.attention import (
    BATCHED_QUERY_MAX,
    ForwardContext,
    paged_attention,
)

BLOCK = 4


def tables(context_lens: list[int]) -> list[list[int]]:
    """Block tables in scattered, disjoint blocks (reversed order), as a busy cache has."""
    tables, next_block = [], 0
    for total in context_lens:
        count = -(-total // BLOCK)
        tables.append(list(range(next_block + count - 1, next_block - 1, -1)))
        next_block += count
    return tables


@pytest.mark.parametrize(
    ("query_lens", "context_lens", "heads", "kv_heads"),
    [
        ([1, 1, 1], [5, 17, 9], 4, 4),  # decodes
        ([4, 1, 3], [12, 30, 7], 4, 2),  # verifies and a decode, GQA
        ([2, BATCHED_QUERY_MAX], [2, 40], 6, 2),  # a run of the longest batched length
    ],
)
def test_padded_runs_equal_each_run_alone(
    query_lens: list[int], context_lens: list[int], heads: int, kv_heads: int
) -> None:
    gen = torch.Generator().manual_seed(0)
    slots = BLOCK * sum(-(-t // BLOCK) for t in context_lens)
    k_cache = torch.randn(slots, kv_heads, 8, generator=gen)
    v_cache = torch.randn(slots, kv_heads, 8, generator=gen)
    q = torch.randn(sum(query_lens), heads, 8, generator=gen)
    ctx = ForwardContext.build(tables(context_lens), query_lens, context_lens, BLOCK)
    assert ctx.padded() is not None
    together = paged_attention(q, k_cache, v_cache, ctx, 0.3)
    start = 0
    for table, new, total in zip(tables(context_lens), query_lens, context_lens, strict=True):
        alone = ForwardContext.build([table], [new], [total], BLOCK)
        assert alone.padded() is None  # one run: attended by itself
        expected = paged_attention(q[start : start + new], k_cache, v_cache, alone, 0.3)
        torch.testing.assert_close(together[start : start + new], expected, atol=1e-6, rtol=1e-5)
        start += new


def test_a_batch_with_a_prompt_goes_run_by_run() -> None:
    ctx = ForwardContext.build(tables([3, 40]), [1, BATCHED_QUERY_MAX + 1], [3, 40], BLOCK)
    assert ctx.padded() is None


def test_an_explicit_mask_is_kept_in_the_padded_batch() -> None:
    """Masks given up front (training's chained steps) hold in the padded layout too."""
    gen = torch.Generator().manual_seed(1)
    k_cache = torch.randn(16, 2, 8, generator=gen)
    v_cache = torch.randn(16, 2, 8, generator=gen)
    q = torch.randn(3, 2, 8, generator=gen)
    ctx = ForwardContext.build(tables([6, 5]), [2, 1], [6, 5], BLOCK)
    ctx.masks[0] = torch.tensor([[True, False, True, False, True, False]] * 2)
    together = paged_attention(q, k_cache, v_cache, ctx, 0.5)
    alone = ForwardContext.build(tables([6, 5])[:1], [2], [6], BLOCK)
    alone.masks[0] = ctx.masks[0]
    expected = paged_attention(q[:2], k_cache, v_cache, alone, 0.5)
    torch.testing.assert_close(together[:2], expected, atol=1e-6, rtol=1e-5)
