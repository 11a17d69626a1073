"""MTP speculative decoding, the draft side: the model's own multi-token-prediction layer
proposes the next k tokens (greedy, chained), the main model verifies them in one forward
(`sampler.verify`), and rejected drafts cost nothing to undo.

Draft-extend first: the MTP layer consumes every position the main model has committed since
the last round, pairing the hidden state at position i with the token at i + 1 (the last pair
uses the token just sampled), which writes its cache from true hidden states and yields the
first draft. Each further draft feeds the MTP layer its own previous output at the next
position. Rollback is bookkeeping: the sequence's committed length and `mtp_len` only ever
cover accepted tokens, so entries written for rejected drafts are overwritten by the next
round (as SGLang's EAGLE/NEXTN worker does for DeepSeek-V3's MTP layer). Drafts are the
argmax over the model's draft vocabulary (`CausalLM.draft_argmax`), the whole vocabulary unless
the checkpoint ships a reduced one.
"""

import torch

from opencomposer.serving.engines.embedded.runner import ModelRunner
from opencomposer.serving.engines.embedded.scheduler import Run


def can_draft(run: Run) -> bool:
    """A decode step of a speculating sequence whose MTP layer is in step with it."""
    seq = run.seq
    return (
        seq.options.draft_tokens > 0
        and run.samples
        and len(run.tokens) == 1
        and not seq.prefilling
        and len(seq.mtp_hidden) == seq.num_cached - seq.mtp_len
    )


class MTPProposer:
    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner

    @torch.inference_mode()
    def propose(self, runs: list[Run]) -> None:
        """Fill each run's `drafts` with its sequence's `draft_tokens` greedy drafts."""
        model, device = self.runner.model, self.runner.device
        seqs = [run.seq for run in runs]
        lengths = [seq.num_cached - seq.mtp_len for seq in seqs]
        ctx = self.runner.context(runs, lengths=lengths, ends=[s.num_cached for s in seqs])
        next_ids = torch.tensor(
            [t for seq in seqs for t in seq.token_ids[seq.mtp_len + 1 : seq.num_cached + 1]],
            dtype=torch.long,
            device=device,
        )
        hidden = torch.stack([h for seq in seqs for h in seq.mtp_hidden])
        states = model.mtp_forward(next_ids, hidden, ctx)
        last = torch.cumsum(torch.tensor(lengths), 0) - 1
        states = states[last.to(device)]
        drafts = model.draft_argmax(states).tolist()
        for run, seq, draft in zip(runs, seqs, drafts, strict=True):
            run.drafts = [draft]
            seq.mtp_len = seq.num_cached
            seq.mtp_hidden.clear()
        for step in range(1, max(seq.options.draft_tokens for seq in seqs)):
            active = [i for i, seq in enumerate(seqs) if seq.options.draft_tokens > step]
            chained = [runs[i] for i in active]
            ctx = self.runner.context(
                chained, lengths=[1] * len(active), ends=[seqs[i].num_cached + step for i in active]
            )
            ids = torch.tensor([runs[i].drafts[-1] for i in active], device=device)
            states = model.mtp_forward(ids, states[active], ctx)
            for i, draft in zip(active, model.draft_argmax(states).tolist(), strict=True):
                runs[i].drafts.append(draft)
            states = _scatter(states, active, len(seqs))


def _scatter(rows: torch.Tensor, indices: list[int], size: int) -> torch.Tensor:
    """Put the active sequences' states back at their batch positions (others unused)."""
    full = rows.new_zeros(size, rows.shape[-1])
    full[indices] = rows
    return full
