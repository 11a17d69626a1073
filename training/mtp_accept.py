"""How many drafted tokens the engine would accept: MTP acceptance measured as the engine runs it.

For each prompt the real engine first decodes a plain greedy continuation (the tokens a
speculating engine must reproduce). One forward over prompt + continuation gives every main
hidden state; one MTP pass over all (hidden i, token i + 1) pairs is the engine's draft-extend
for every possible round start at once (the MTP layer is causal, so pair j sees exactly the
true pairs 0 .. j, as in the engine's cache); each further chained step runs every round start
as its own sequence of one query, reading the true entries before it and its own chained
entries (the MTP's previous output state with the previous draft, as `MTPProposer` feeds it).
Then each k replays the engine's rounds: from the first sampled token, accept the leading
drafts that equal the greedy continuation, emit one more token, and jump.

The figure is `SpecStats.accept_length`, the one `opencomposer engine bench` prints: tokens per
verify step *including* the target's own token (1 + accepted drafts), at most k + 1. Accepted
drafts of the last round count even when max_tokens cuts the output, as in the engine.

`draft_vocab` restricts each draft's argmax to a token subset (FR-Spec's frequent tokens);
verification, and so the output, stays the full model's.
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from opencomposer.serving.engines.embedded.attention import ForwardContext
from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, SpecStats
from opencomposer.training.batch import PackedRow
from opencomposer.training.errors import TrainingError
from opencomposer.training.mtp_distill import contiguous_context


def prompts_of(rows: Sequence[PackedRow], prompt_len: int) -> list[list[int]]:
    """The first `prompt_len` tokens of each row's first document that long (rows with none
    are left out): held-out text the model continues."""
    prompts = []
    for row in rows:
        offset = 0
        for length in row.doc_lengths:
            if length >= prompt_len:
                prompts.append(row.tokens[offset : offset + prompt_len].tolist())
                break
            offset += length
    return prompts


def greedy_continuations(
    model: CausalLM, prompts: list[list[int]], max_tokens: int
) -> list[list[int]]:
    """Prompt + `max_tokens` plain greedy tokens each, decoded by the real engine."""
    longest = max(len(p) for p in prompts) + max_tokens
    block = EngineConfig.block_size
    slots = len(prompts) * (longest // block + 2) * block
    engine = LLMEngine(model, EngineConfig(kv_cache_tokens=slots, max_seqs=len(prompts)))
    seqs = engine.generate(prompts, SamplingOptions(max_tokens=max_tokens))
    return [seq.token_ids for seq in seqs]


def draft_argmax(model: CausalLM, states: Tensor, draft_vocab: Tensor | None) -> Tensor:
    """The greedy draft of each MTP state, over the whole vocabulary or `draft_vocab` only."""
    logits = model.compute_logits(states)
    if draft_vocab is None:
        return logits.argmax(-1)
    return draft_vocab[logits[:, draft_vocab].argmax(-1)]


@torch.inference_mode()
def chained_drafts(
    model: CausalLM,
    ids: list[int],
    first: int,
    starts: int,
    k: int,
    draft_vocab: Tensor | None = None,
) -> Tensor:
    """[starts, k] greedy chained drafts of rounds that begin with the token at index
    first .. first + starts - 1 of `ids` just sampled (its KV not written yet): row r, column
    s drafts the token at first + r + s + 1."""
    device = next(model.parameters()).device
    total = len(ids)
    if first < 1 or first + starts + k > total:
        raise ValueError(f"rounds {first} .. {first + starts - 1} with {k} drafts in {total} ids")
    true_slots = total - 1
    model.allocate_kv_cache(max(total, true_slots + starts * (k - 1)))
    tokens = torch.tensor(ids, dtype=torch.long, device=device)
    hidden = model(tokens, contiguous_context([total], device))
    states = model.mtp_forward(tokens[1:], hidden[:-1], contiguous_context([true_slots], device))
    rounds = torch.arange(first, first + starts)
    state = states[(rounds - 1).to(device)]
    drafts = [draft_argmax(model, state, draft_vocab)]
    for step in range(1, k):
        chain = [true_slots + r * (k - 1) for r in range(starts)]
        ctx = ForwardContext(
            positions=(rounds + step - 1).to(device),
            query_lens=[1] * starts,
            context_lens=(rounds + step).tolist(),
            slot_mapping=torch.tensor([c + step - 1 for c in chain], device=device),
            gather_indices=[
                torch.cat([torch.arange(int(t)), torch.arange(c, c + step)]).to(device)
                for t, c in zip(rounds, chain, strict=True)
            ],
        )
        state = model.mtp_forward(drafts[-1], state, ctx)
        drafts.append(draft_argmax(model, state, draft_vocab))
    return torch.stack(drafts, dim=1).cpu()


def replay_rounds(drafts: Tensor, ids: list[int], first: int, max_tokens: int, k: int) -> SpecStats:
    """The engine's verify rounds over a greedy sequence whose output starts at `first`,
    drafting the first k columns of `drafts` (as `chained_drafts` made them)."""
    stats = SpecStats()
    at, produced = first, 1  # the prefill sampled the first output token
    while produced < max_tokens:
        proposed = drafts[at - first, :k].tolist()
        accepted = 0
        while accepted < k and proposed[accepted] == ids[at + accepted + 1]:
            accepted += 1
        stats.verify_steps += 1
        stats.drafted += k
        stats.accepted += accepted
        produced += accepted + 1
        at += accepted + 1
    return stats


def chained_acceptance(
    model: CausalLM,
    rows: Sequence[PackedRow],
    k_max: int = 3,
    *,
    prompt_len: int = 32,
    max_tokens: int = 64,
    draft_vocab: Tensor | None = None,
) -> dict[int, SpecStats]:
    """k -> the engine's speculation statistics, summed over every prompt, when it drafts k
    tokens a step (k = 1 .. k_max), greedy, for `max_tokens` output tokens per prompt."""
    if not model.num_mtp_layers:
        raise TrainingError(f"{type(model).__name__} has no MTP layer to measure")
    if k_max < 1 or max_tokens < 2:
        raise TrainingError(f"k_max {k_max} and max_tokens {max_tokens}: both must be >= 1 / 2")
    prompts = prompts_of(rows, prompt_len)
    if not prompts:
        raise TrainingError(f"no held-out document has the {prompt_len} tokens of a prompt")
    totals = {k: SpecStats() for k in range(1, k_max + 1)}
    for ids in greedy_continuations(model, prompts, max_tokens + k_max):
        drafts = chained_drafts(model, ids, prompt_len, max_tokens, k_max, draft_vocab)
        for k, total in totals.items():
            stats = replay_rounds(drafts, ids, prompt_len, max_tokens, k)
            total.verify_steps += stats.verify_steps
            total.drafted += stats.drafted
            total.accepted += stats.accepted
    return totals
