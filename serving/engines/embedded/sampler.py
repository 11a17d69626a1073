"""Turning logits into tokens: greedy, or temperature / top-k / top-p sampling with a per-request
seeded generator, and the acceptance rule of speculative decoding.

The distribution a token is sampled from (`target_probs`: temperature, then top-k, then top-p,
renormalized) is also the one speculative verification tests drafts against, so speculation
never changes what the model would have produced: greedy output is the same token for token,
and sampled output has exactly the same distribution (the rejection sampling of Leviathan et
al. and Chen et al., 2023). The
logprob recorded for a sampled token is its log-probability under that distribution (what an
RL importance ratio needs); for greedy requests, under the plain softmax. The alternatives
`top_logprobs` reports come from that same distribution, so a sampled token's logprob is the
one it has among them.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from opencomposer.serving.engines.embedded.sequence import SamplingOptions


def target_probs(logits: Tensor, options: SamplingOptions) -> Tensor:
    """[N, V] float32 logits -> [N, V] the distribution sampling draws from."""
    scaled = logits / max(options.temperature, 1e-6)
    if options.top_k and options.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, options.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if options.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(before >= options.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(
    logits: Tensor, options: SamplingOptions, generator: torch.Generator | None
) -> tuple[int, float]:
    """One token from [V] logits, with its logprob."""
    if options.greedy:
        token = int(torch.argmax(logits))
        return token, float(torch.log_softmax(logits, dim=-1)[token])
    probs = target_probs(logits.unsqueeze(0), options)[0]
    token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(torch.log(probs[token]))


def top_logprobs(logits: Tensor, options: SamplingOptions, k: int) -> list[list[tuple[int, float]]]:
    """The `k` most likely (token, logprob) of each row of [N, V] logits, best first.

    They are taken from the processed distribution, the one each token was really drawn from
    (after temperature, top-k and top-p; the plain softmax for greedy), not from the raw
    logits: the chosen token's logprob is then its entry here, and a token that top-k or
    top-p removed shows as impossible (-inf) rather than with a probability it never had."""
    if options.greedy:
        log_probs = torch.log_softmax(logits, dim=-1)
    else:
        log_probs = torch.log(target_probs(logits, options))
    values, ids = torch.topk(log_probs, min(k, log_probs.shape[-1]), dim=-1)
    return [
        list(zip(row_ids, row_values, strict=True))
        for row_ids, row_values in zip(ids.tolist(), values.tolist(), strict=True)
    ]


@dataclass
class Verdict:
    accepted: int
    """Drafts accepted, from the first."""

    tokens: list[int]
    """The accepted drafts, then one token from the target (a correction or a bonus)."""

    logprobs: list[float]


def verify(
    logits: Tensor, drafts: list[int], options: SamplingOptions, generator: torch.Generator | None
) -> Verdict:
    """Accept or reject greedy drafts against the target's [k + 1, V] logits (row s scores
    draft s + 1; the last row gives the bonus token).

    Greedy: accept while the draft is the argmax; the first mismatch emits the argmax instead.
    Sampling: the drafts come from an argmax (a point-mass proposal q), so draft d is accepted
    with probability p(d); on rejection the token is drawn from p with d removed and
    renormalized, the residual max(0, p - q) / (1 - p(d)). Either way each emitted token has
    exactly the target's distribution.
    """
    tokens: list[int] = []
    logprobs: list[float] = []
    if options.greedy:
        log_probs = torch.log_softmax(logits, dim=-1)
        best = torch.argmax(logits, dim=-1).tolist()
        for step, draft in enumerate(drafts):
            if draft != best[step]:
                break
            tokens.append(draft)
            logprobs.append(float(log_probs[step, draft]))
        row = len(tokens)
        tokens.append(best[row])
        logprobs.append(float(log_probs[row, best[row]]))
        return Verdict(len(tokens) - 1, tokens, logprobs)
    probs = target_probs(logits, options)
    for step, draft in enumerate(drafts):
        p = probs[step]
        if float(torch.rand((), generator=generator)) < float(p[draft]):
            tokens.append(draft)
            logprobs.append(float(torch.log(p[draft])))
            continue
        residual = p.clone()
        residual[draft] = 0.0
        token = int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
        tokens.append(token)
        logprobs.append(float(torch.log(p[token])))
        return Verdict(step, tokens, logprobs)
    last = probs[len(drafts)]
    token = int(torch.multinomial(last, 1, generator=generator))
    tokens.append(token)
    logprobs.append(float(torch.log(last[token])))
    return Verdict(len(drafts), tokens, logprobs)
