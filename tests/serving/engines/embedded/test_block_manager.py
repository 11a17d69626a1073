"""KV blocks: allocation, prefix reuse across requests, freeing, running out."""

import pytest

from opencomposer.serving.engines.embedded.block_manager import BlockManager, OutOfBlocks
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, Sequence


def seq(tokens: list[int]) -> Sequence:
    return Sequence(list(tokens), SamplingOptions())


def test_a_new_prompt_gets_fresh_blocks() -> None:
    blocks = BlockManager(num_blocks=8, block_size=4)
    first = seq(range(10))
    blocks.allocate_prompt(first)
    assert (len(first.block_table), first.num_cached, blocks.free_blocks) == (3, 0, 5)


def test_a_shared_prefix_is_reused_once_committed() -> None:
    blocks = BlockManager(num_blocks=8, block_size=4)
    first = seq(range(10))
    blocks.allocate_prompt(first)
    first.num_cached = 10  # the prompt has been computed
    blocks.register(first)
    second = seq([*range(8), 99, 98, 97])  # same first two blocks, then different
    blocks.allocate_prompt(second)
    assert second.block_table[:2] == first.block_table[:2]
    assert second.num_cached == 8
    # A prompt entirely in the cache still computes its last block (its logits are needed).
    third = seq(range(8))
    blocks.allocate_prompt(third)
    assert third.block_table[:1] == first.block_table[:1] and third.num_cached == 4


def test_freed_blocks_stay_reusable_until_handed_out_again() -> None:
    blocks = BlockManager(num_blocks=4, block_size=4)
    first = seq(range(9))
    blocks.allocate_prompt(first)
    first.num_cached = 9
    blocks.register(first)
    reused = first.block_table[:2]
    blocks.free(first)
    assert blocks.free_blocks == 4
    again = seq(range(12))
    blocks.allocate_prompt(again)
    assert again.block_table[:2] == reused and again.num_cached == 8
    blocks.free(again)
    # Filling the cache with other tokens hands the old blocks out and forgets their hashes.
    other = seq(range(100, 116))
    blocks.allocate_prompt(other)
    blocks.free(other)
    late = seq(range(12))
    blocks.allocate_prompt(late)
    assert late.num_cached == 0


def test_uncommitted_tokens_are_never_registered() -> None:
    blocks = BlockManager(num_blocks=8, block_size=4)
    first = seq(range(6))
    blocks.allocate_prompt(first)
    first.num_cached = 6
    blocks.ensure(first, 11)  # drafts would be verified in positions 6..10
    assert len(first.block_table) == 3
    blocks.register(first)  # only the first block is full of committed tokens
    probe = seq([*range(6), 6, 7, 8])
    blocks.allocate_prompt(probe)
    assert probe.num_cached == 4


def test_running_out_is_an_error_that_takes_nothing() -> None:
    blocks = BlockManager(num_blocks=2, block_size=4)
    big = seq(range(12))
    with pytest.raises(OutOfBlocks):
        blocks.allocate_prompt(big)
    assert blocks.free_blocks == 2 and big.block_table == []
    small = seq(range(5))
    blocks.allocate_prompt(small)
    with pytest.raises(OutOfBlocks):
        blocks.ensure(small, 9)
    assert len(small.block_table) == 2
