"""KV-cache blocks: allocation, sharing of common prefixes, freeing.

The cache is `num_blocks` blocks of `block_size` token slots. A block that holds a full run of
committed tokens is registered under a hash of its tokens and of every token before it, so a
later request that starts with the same tokens (the next turn of a thread, a rollout sharing a
prompt, the context a self-summary continues from) reuses those blocks instead of recomputing
them. Freed blocks keep their contents and hash until they are handed out again, oldest freed
first, so a finished request's prefix stays reusable as long as memory allows. Blocks holding
speculative drafts are never registered: only tokens that are committed are hashed.
"""

import hashlib
from collections import OrderedDict

from opencomposer.serving.engines.embedded.sequence import Sequence


class OutOfBlocks(Exception):
    """The cache has no free block for this request right now."""


def _chain(previous: bytes, tokens: list[int]) -> bytes:
    return hashlib.blake2b(
        previous + b"".join(t.to_bytes(4, "little") for t in tokens), digest_size=16
    ).digest()


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.num_blocks = num_blocks
        self._refs = [0] * num_blocks
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._by_hash: dict[bytes, int] = {}
        self._hash_of: dict[int, bytes] = {}
        # sequence id -> (full blocks registered, hash chain up to them)
        self._registered: dict[int, tuple[int, bytes]] = {}

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def allocate_prompt(self, seq: Sequence) -> None:
        """Give a new sequence blocks for its prompt, reusing cached prefix blocks; sets
        `num_cached` to the tokens found in the cache. At least the last prompt token is
        always computed, since its logits are needed."""
        size = self.block_size
        reusable: list[int] = []
        matched = b""
        for start in range(0, len(seq.token_ids) - 1 - (len(seq.token_ids) - 1) % size, size):
            digest = _chain(matched, seq.token_ids[start : start + size])
            block = self._by_hash.get(digest)
            if block is None:
                break
            reusable.append(block)
            matched = digest
        needed = self.blocks_for(len(seq.token_ids)) - len(reusable)
        fresh_available = len(self._free) - sum(1 for b in reusable if b in self._free)
        if needed > fresh_available:
            raise OutOfBlocks(f"need {needed} blocks, {fresh_available} free")
        for block in reusable:
            self._take(block)
        seq.block_table = reusable + [self._take_free() for _ in range(needed)]
        seq.num_cached = len(reusable) * size
        if seq.prompt_cache_hits is None:
            seq.prompt_cache_hits = min(seq.num_cached, seq.prompt_len)
        self._registered[seq.id] = (len(reusable), matched)

    def ensure(self, seq: Sequence, tokens: int) -> None:
        """Make the block table cover `tokens` positions (decode, speculative verify)."""
        needed = self.blocks_for(tokens) - len(seq.block_table)
        if needed > len(self._free):
            raise OutOfBlocks(f"need {needed} more blocks, {len(self._free)} free")
        seq.block_table.extend(self._take_free() for _ in range(needed))

    def register(self, seq: Sequence) -> None:
        """Hash the blocks that committed tokens have filled since the last call."""
        size = self.block_size
        done, digest = self._registered.get(seq.id, (0, b""))
        full = min(seq.num_cached, len(seq.token_ids)) // size
        for index in range(done, full):
            digest = _chain(digest, seq.token_ids[index * size : (index + 1) * size])
            block = seq.block_table[index]
            if digest not in self._by_hash:
                self._forget(block)
                self._by_hash[digest] = block
                self._hash_of[block] = digest
        self._registered[seq.id] = (max(done, full), digest)

    def forget_cached(self) -> None:
        """Drop every cached prefix: their keys and values were computed with weights that
        are no longer served. Blocks in use stay with their sequences."""
        self._by_hash.clear()
        self._hash_of.clear()

    def free(self, seq: Sequence) -> None:
        for block in reversed(seq.block_table):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                self._free[block] = None
        seq.block_table = []
        self._registered.pop(seq.id, None)

    def _take(self, block: int) -> None:
        self._refs[block] += 1
        self._free.pop(block, None)

    def _take_free(self) -> int:
        block, _ = self._free.popitem(last=False)  # oldest freed first: newest stay reusable
        self._forget(block)
        self._refs[block] = 1
        return block

    def _forget(self, block: int) -> None:
        digest = self._hash_of.pop(block, None)
        if digest is not None and self._by_hash.get(digest) == block:
            del self._by_hash[digest]
