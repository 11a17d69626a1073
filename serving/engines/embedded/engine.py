"""The engine loop: requests in, tokens out, one batched forward per step.

`step()` reads in a few lines: schedule the next runs, draft for the speculating ones, run the
model, then advance each sequence (sample, or verify drafts and keep the accepted ones) and
release the finished. It is synchronous and single-threaded on purpose; `EmbeddedEngine`
drives it from a worker thread for the asyncio side.
"""

import time
from collections import abc
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from opencomposer.serving.engines.embedded.block_manager import BlockManager
from opencomposer.serving.engines.embedded.constrained import forbid
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.runner import ModelRunner, RunOutput
from opencomposer.serving.engines.embedded.sampler import Verdict, sample, top_logprobs, verify
from opencomposer.serving.engines.embedded.scheduler import Run, Scheduler
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, Sequence
from opencomposer.serving.engines.embedded.speculative import MTPProposer, can_draft


@dataclass(frozen=True)
class EngineConfig:
    block_size: int = 16
    kv_cache_tokens: int = 32_768
    """Token slots of KV cache (per layer); with the block size, the number of blocks."""

    max_batch_tokens: int = 2048
    """New tokens per forward: bounds a step's latency and memory."""

    max_seqs: int = 32


@dataclass(frozen=True)
class StepTiming:
    """Where one step's time went, for whoever weighs speculation's costs (`engine bench`):
    a speculating step pays its drafts, then a forward over every draft and the token before
    them, and gains only if enough drafts are accepted to cover both."""

    seconds: float
    """The whole step: scheduling, drafting, the forward, sampling or verifying."""

    drafting: float
    """Of which the MTP layer's drafts (0 when no sequence drafted)."""

    decoding: bool
    """Every run of the step was one token (with its drafts, if any): no prompt in it."""


class LLMEngine:
    last_step: StepTiming | None = None
    """The timing of the latest step that ran a forward."""

    def __init__(self, model: CausalLM, config: EngineConfig = EngineConfig()) -> None:
        self.model = model
        self.config = config
        device = next(model.parameters()).device
        num_blocks = config.kv_cache_tokens // config.block_size
        model.allocate_kv_cache(num_blocks * config.block_size)
        self.blocks = BlockManager(num_blocks, config.block_size)
        self.scheduler = Scheduler(
            self.blocks, max_batch_tokens=config.max_batch_tokens, max_seqs=config.max_seqs
        )
        self.runner = ModelRunner(model, config.block_size, device)
        self.proposer = MTPProposer(self.runner)

    def add(self, prompt_ids: list[int], options: SamplingOptions) -> Sequence:
        if not prompt_ids:
            raise ValueError("the prompt has no tokens")
        if options.draft_tokens and not self.model.num_mtp_layers:
            raise ValueError(f"{type(self.model).__name__} has no MTP layer to draft with")
        seq = Sequence(list(prompt_ids), options)
        self.scheduler.add(seq)
        return seq

    def abort(self, seq: Sequence) -> None:
        """Stop a request and free its blocks."""
        self.scheduler.abort(seq)

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def update_weights(self, tensors: Mapping[str, Tensor], *, delta: bool = False) -> None:
        """Replace (or, with `delta`, add to) the tensors named as in a checkpoint, all or
        nothing: every tensor is checked against the model before any is written. Only
        between requests; the prefix cache is dropped, since it holds the old weights' keys
        and values."""
        if self.scheduler.has_work():
            raise RuntimeError("weights change only between requests")
        writes: list[tuple[Tensor, Tensor]] = []
        for name, value in tensors.items():
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                raise ValueError(f"{name} holds NaN or infinite values")
            try:
                pairs = self.model.checkpoint_targets(name, value)
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
            for target, piece in pairs:
                if target.shape != piece.shape:
                    raise ValueError(
                        f"{name} has shape {tuple(value.shape)}; the model's is "
                        f"{tuple(target.shape)}"
                    )
                writes.append((target, piece))
        with torch.no_grad():
            for target, piece in writes:
                source = piece.to(device=target.device, dtype=target.dtype)
                if delta:
                    target.add_(source)
                else:
                    target.copy_(source)
        self.blocks.forget_cached()

    def step(self) -> list[Sequence]:
        """One forward; returns the sequences it advanced."""
        began = time.perf_counter()
        runs = self.scheduler.schedule()
        if not runs:
            return []
        decoding = all(len(run.tokens) == 1 and run.samples for run in runs)
        drafting = [run for run in runs if can_draft(run)]
        drafting_seconds = 0.0
        if drafting:
            drafts_began = time.perf_counter()
            self.proposer.propose(drafting)
            drafting_seconds = time.perf_counter() - drafts_began
        for run, output in zip(runs, self.runner.forward(runs), strict=True):
            self._advance(run, output)
            if run.seq.finished:
                self.scheduler.finish(run.seq)
        self.last_step = StepTiming(time.perf_counter() - began, drafting_seconds, decoding)
        return [run.seq for run in runs]

    def generate(self, prompts: list[list[int]], options: SamplingOptions) -> list[Sequence]:
        """Run prompts to completion together (tests, benchmarks, offline use)."""
        seqs = [self.add(prompt, options) for prompt in prompts]
        while self.has_work():
            self.step()
        return seqs

    def _advance(self, run: Run, output: RunOutput) -> None:
        seq, options = run.seq, run.seq.options
        logits = output.logits
        if logits is not None and options.banned_token_ids:
            logits = forbid(logits, options.banned_token_ids)
        if logits is None:
            verdict, committed = None, len(run.tokens)  # a prompt chunk: nothing to sample yet
        elif run.drafts:
            if seq.constraint is not None:
                logits = seq.constraint.mask_drafts(logits, run.drafts)
            verdict = verify(logits, run.drafts, options, seq.generator)
            committed = len(run.tokens) + verdict.accepted
            seq.spec.verify_steps += 1
            seq.spec.drafted += len(run.drafts)
            seq.spec.accepted += verdict.accepted
        else:
            last = logits[-1] if seq.constraint is None else seq.constraint.mask(logits[-1])
            token, logprob = sample(last, options, seq.generator)
            verdict, committed = Verdict(0, [token], [logprob]), len(run.tokens)
            logits = last[None]  # the row the token was drawn from, as masked
        seq.num_cached += committed
        if options.draft_tokens:
            seq.mtp_hidden.extend(output.hidden[:committed].unbind(0))
        if output.experts is not None and options.capture_experts:
            seq.routed_experts.append(output.experts[:committed])
        if verdict is not None:
            # Alternatives come from the logits as masked and banned: what could be drawn.
            tops = self._alternatives(run, logits, verdict) or [None] * len(verdict.tokens)
            for token, logprob, top in zip(verdict.tokens, verdict.logprobs, tops, strict=True):
                seq.append(token, logprob if options.logprobs else None, top)
                if seq.finished:
                    break
        self.blocks.register(seq)

    @staticmethod
    def _alternatives(
        run: Run, logits: Tensor | None, verdict: Verdict
    ) -> abc.Sequence[list[tuple[int, float]] | None] | None:
        """The top alternatives at each token of `verdict`, only when asked: the last row of
        a plain step, the first rows of a verification (row s scored token s)."""
        options = run.seq.options
        if logits is None or not (options.logprobs and options.top_logprobs):
            return None
        rows = logits[: len(verdict.tokens)] if run.drafts else logits[-1:]
        return top_logprobs(rows, options, options.top_logprobs)
