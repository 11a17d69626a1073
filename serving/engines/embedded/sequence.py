"""A request as the engine tracks it: its tokens, where their KV entries live, how to sample.

`token_ids` holds the prompt and every committed output token. The last token's KV entry is
usually not written yet: `num_cached` counts the tokens whose entries are in the cache, so the
next forward's input is `token_ids[num_cached:]` (a prompt chunk, or the token just sampled).
With MTP speculation the sequence also keeps the main model's hidden states of positions its
MTP layer has not consumed yet (`mtp_hidden`, from `mtp_len` on).
"""

import itertools
from dataclasses import dataclass, field
from enum import Enum

import torch
from torch import Tensor

from opencomposer.serving.engines.embedded.constrained import Constraint, Grammar

_ids = itertools.count()


class Status(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class SamplingOptions:
    temperature: float = 0.0
    """0 means greedy."""

    top_p: float = 1.0
    top_k: int = 0
    """0 means no top-k cut."""

    max_tokens: int = 256
    seed: int | None = None
    stop_token_ids: frozenset[int] = frozenset()
    logprobs: bool = False
    top_logprobs: int = 0
    """With `logprobs`: alternatives to record at each output token."""

    capture_experts: bool = False
    draft_tokens: int = 0
    """Tokens the MTP layer drafts per step (0: no speculation)."""

    grammar: Grammar | None = None
    """What the output must match (see `constrained`); None: anything."""

    banned_token_ids: frozenset[int] = frozenset()
    """Tokens never sampled (a tool call's opening marker under `tool_choice: none`)."""

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


@dataclass
class SpecStats:
    verify_steps: int = 0
    drafted: int = 0
    accepted: int = 0

    @property
    def accept_length(self) -> float:
        """Tokens produced per verify step (1 + accepted drafts)."""
        return (self.verify_steps + self.accepted) / self.verify_steps if self.verify_steps else 0.0

    @property
    def accept_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


@dataclass(eq=False)
class Sequence:
    token_ids: list[int]
    options: SamplingOptions
    id: int = field(default_factory=lambda: next(_ids))
    status: Status = Status.WAITING
    block_table: list[int] = field(default_factory=list)
    num_cached: int = 0
    prompt_cache_hits: int | None = None
    """Prompt tokens found in the prefix cache when the sequence was first given blocks (a
    preempted sequence recomputes, but its client was answered from that cache first)."""

    finish_reason: str | None = None
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    """(token, logprob) alternatives at each output token, best first, when asked."""

    routed_experts: list[Tensor] = field(default_factory=list)
    """[positions, layers * top_k] int32 chunks, in position order, when captured."""

    spec: SpecStats = field(default_factory=SpecStats)
    mtp_len: int = 0
    """Positions whose MTP-layer entries are written from true hidden states."""

    mtp_hidden: list[Tensor] = field(default_factory=list)
    """Main-model hidden states of positions mtp_len .. num_cached - 1, in order."""

    def __post_init__(self) -> None:
        self.prompt_len = len(self.token_ids)
        self.generator: torch.Generator | None = None
        if self.options.seed is not None:
            self.generator = torch.Generator().manual_seed(self.options.seed)
        grammar = self.options.grammar
        self.constraint: Constraint | None = grammar.start() if grammar else None

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len :]

    @property
    def prefilling(self) -> bool:
        """The prompt is not fully in the cache yet (no token sampled)."""
        return self.num_cached < self.prompt_len

    @property
    def finished(self) -> bool:
        return self.status == Status.FINISHED

    def append(
        self, token: int, logprob: float | None, top: list[tuple[int, float]] | None = None
    ) -> None:
        self.token_ids.append(token)
        if logprob is not None:
            self.logprobs.append(logprob)
        if top is not None:
            self.top_logprobs.append(top)
        if self.constraint is not None:
            self.constraint.consume(token)
        grammar_done = self.constraint is not None and self.constraint.complete
        if token in self.options.stop_token_ids or grammar_done:
            self.finish("stop")
        elif len(self.output_ids) >= self.options.max_tokens:
            self.finish("length")

    def finish(self, reason: str) -> None:
        self.status = Status.FINISHED
        self.finish_reason = reason
