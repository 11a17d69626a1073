"""Runs the model on a batch of runs: builds the forward context from their block tables,
computes hidden states for every new token and logits only where the engine will sample or
verify, and slices out routed experts per sequence when they are captured."""

from dataclasses import dataclass

import torch
from torch import Tensor

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.scheduler import Run


@dataclass
class RunOutput:
    hidden: Tensor
    """[run length, hidden] final hidden states of the run's tokens (then drafts)."""

    logits: Tensor | None
    """[drafts + 1, vocab] float32 for a run that samples, else None."""

    experts: Tensor | None
    """[run length, layers * top_k] int32 routed experts, when captured."""


class ModelRunner:
    def __init__(self, model: CausalLM, block_size: int, device: torch.device) -> None:
        self.model = model
        self.block_size = block_size
        self.device = device

    def context(
        self,
        runs: list[Run],
        *,
        capture: bool = False,
        lengths: list[int] | None = None,
        ends: list[int] | None = None,
    ) -> ForwardContext:
        """The context for `runs`: each run's new tokens end at `ends` (default: after its
        committed and draft tokens) and number `lengths` (default: all of them)."""
        lengths = lengths or [run.length for run in runs]
        ends = ends or [run.seq.num_cached + run.length for run in runs]
        ctx = ForwardContext.build(
            [run.seq.block_table for run in runs],
            lengths,
            ends,
            self.block_size,
            capture_experts=capture,
        )
        ctx.positions = ctx.positions.to(self.device)
        ctx.slot_mapping = ctx.slot_mapping.to(self.device)
        ctx.gather_indices = [g.to(self.device) for g in ctx.gather_indices]
        return ctx

    @torch.inference_mode()
    def forward(self, runs: list[Run]) -> list[RunOutput]:
        capture = any(run.seq.options.capture_experts for run in runs)
        ctx = self.context(runs, capture=capture)
        ids = torch.tensor(
            [t for run in runs for t in (*run.tokens, *run.drafts)],
            dtype=torch.long,
            device=self.device,
        )
        hidden = self.model(ids, ctx)
        rows: list[int] = []  # the hidden states that are sampled from
        start = 0
        for run in runs:
            if run.samples:
                rows.extend(range(start + len(run.tokens) - 1, start + run.length))
            start += run.length
        logits = self.model.compute_logits(hidden[rows]).cpu() if rows else None
        experts = torch.cat(ctx.routed_experts, dim=1).cpu() if ctx.routed_experts else None
        outputs: list[RunOutput] = []
        start, row = 0, 0
        for run in runs:
            end = start + run.length
            run_logits = None
            if run.samples and logits is not None:
                run_logits = logits[row : row + len(run.drafts) + 1]
                row += len(run.drafts) + 1
            outputs.append(
                RunOutput(
                    hidden[start:end],
                    run_logits,
                    experts[start:end] if experts is not None else None,
                )
            )
            start = end
        return outputs
