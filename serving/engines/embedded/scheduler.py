"""Continuous batching: which sequences run in the next forward, and how many tokens each.

Every step takes the running sequences' next tokens first (one each, or one plus its drafts
under speculation), then spends what is left of the token budget on prompts: a waiting
request is admitted when its blocks fit, and a long prompt is prefilled in chunks across
steps, so decoding requests keep producing tokens while a big prompt is read. When the cache
runs out mid-decode, the most recently admitted sequence is preempted: its blocks are freed
and it goes back to the front of the queue to be recomputed (its committed tokens are kept).
"""

from collections import deque
from dataclasses import dataclass, field

import torch

from opencomposer.serving.engines.embedded.block_manager import BlockManager, OutOfBlocks
from opencomposer.serving.engines.embedded.sequence import Sequence, Status


@dataclass
class Run:
    """One sequence's share of a forward."""

    seq: Sequence
    tokens: list[int]
    """Committed tokens to process: a prompt chunk, or the last sampled token."""

    drafts: list[int] = field(default_factory=list)
    """Speculative tokens appended after `tokens` for verification."""

    @property
    def samples(self) -> bool:
        """The run ends at the last known token, so the forward yields a next token."""
        return self.seq.num_cached + len(self.tokens) == len(self.seq.token_ids)

    @property
    def length(self) -> int:
        return len(self.tokens) + len(self.drafts)


class Scheduler:
    def __init__(self, blocks: BlockManager, *, max_batch_tokens: int, max_seqs: int) -> None:
        self.blocks = blocks
        self.max_batch_tokens = max_batch_tokens
        self.max_seqs = max_seqs
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def abort(self, seq: Sequence, reason: str = "abort") -> None:
        if seq in self.waiting:
            self.waiting.remove(seq)
        if seq in self.running:
            self.running.remove(seq)
            self.blocks.free(seq)
        if not seq.finished:
            seq.finish(reason)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[Run]:
        runs: list[Run] = []
        budget = self.max_batch_tokens
        for seq in list(self.running):
            if seq not in self.running:
                continue  # preempted below to make room for an earlier one
            want = len(seq.token_ids) - seq.num_cached
            take = min(want, budget) if seq.prefilling else want
            if take <= 0 or (not seq.prefilling and take + seq.options.draft_tokens > budget):
                continue
            if not self._room(seq, seq.num_cached + take + self._drafts(seq)):
                continue
            runs.append(Run(seq, seq.token_ids[seq.num_cached : seq.num_cached + take]))
            budget -= take + self._drafts(seq)
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            seq = self.waiting[0]
            try:
                self.blocks.allocate_prompt(seq)
            except OutOfBlocks:
                if not self.running:
                    self.waiting.popleft()
                    seq.finish("length")  # larger than the whole cache: it can never run
                break
            self.waiting.popleft()
            # Shared prefix blocks hold MTP entries too, exact when the request that wrote them
            # speculated (same tokens, same hidden states); otherwise they only lower
            # acceptance, never change the output, so drafting can start right after them.
            seq.mtp_len = seq.num_cached
            if seq.routed_experts:  # re-admitted after preemption: recomputed rows come again
                seq.routed_experts = [torch.cat(seq.routed_experts)[: seq.num_cached]]
            seq.status = Status.RUNNING
            self.running.append(seq)
            take = min(len(seq.token_ids) - seq.num_cached, budget)
            runs.append(Run(seq, seq.token_ids[seq.num_cached : seq.num_cached + take]))
            budget -= take
        return runs

    def _drafts(self, seq: Sequence) -> int:
        return 0 if seq.prefilling else seq.options.draft_tokens

    def _room(self, seq: Sequence, tokens: int) -> bool:
        """Blocks for `tokens` positions of `seq`, preempting later sequences if needed."""
        while True:
            try:
                self.blocks.ensure(seq, tokens)
                return True
            except OutOfBlocks:
                victim = self.running[-1]
                self.preempt(victim)
                if victim is seq:
                    return False

    def preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.blocks.free(seq)
        seq.status = Status.WAITING
        seq.num_cached = 0
        seq.mtp_len = 0
        seq.mtp_hidden.clear()
        self.waiting.appendleft(seq)

    def finish(self, seq: Sequence) -> None:
        if seq in self.running:
            self.running.remove(seq)
        self.blocks.free(seq)
