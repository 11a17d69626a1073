"""`opencomposer engine bench`: the embedded engine's decoding speed, each figure beside a
baseline, on one model with the same prompts and the same output length (greedy, EOS ignored).

- MTP speculative decoding vs plain greedy decoding, one request at a time: output tokens/s,
  TPOT ((E2E - TTFT) / (output tokens - 1), as SGLang's bench_serving reports it), acceptance
  length (tokens per verify step) and rate (accepted / drafted), and whether the outputs are
  identical: greedy speculation is lossless, so they must be. Per k, a decode step's time
  beside a plain one, split into the drafts and the forward over the k + 1 tokens (with the
  verdict): the speed-up is the tokens a step yields over that cost. With random weights (a fresh
  `tiny-moe`) the MTP layer's drafts are almost never accepted and only add work, so the
  speed-up is near or below 1 there; trained MTP layers are what make it pay. On CPU each
  speculating run has its weights packed for a verify's rows, as the engine serves it
  (`packed_linear`); every other run uses the plain product.
- our engine vs transformers' `generate` on the same weights, dtype and device, batch size 1:
  output tokens/s over whole requests (prefill included), and whether the outputs match.
- batch scaling: 1, 4 and 16 requests at once through `LLMEngine`, total output tokens/s.
- prefill: a long prompt's tokens per second up to its first token, beside transformers'
  forward over the same tokens (last-position logits only, as ours computes).
- peak memory: the process's peak resident set (ru_maxrss) after our runs beside right after
  loading, and on CUDA the peak allocated beside the weights alone. transformers runs after
  these are read, so its memory is not in them.

Every run uses a fresh engine (no prefix cache carried between runs) after an untimed warm-up;
runs compared in a row take turns, `repeat` rounds, and each figure comes from the median run.
Machines, the 2-core CI boxes especially, are noisy: compare ratios taken in one run, not
figures across runs; on CPU the numbers check the metric pipeline and the acceptance length,
they are no performance claims. Where other work shares the CPU, torch's OpenMP threads spin
waiting for a descheduled peer at every op: on 2 cores beside one busy process, 2 threads
decoded tiny-moe at 5-15 tokens/s and 1 thread at 130-210 (smollm2-135m: 1.1 and 8-12), so
bench with `--threads 1` there.
"""

import json
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from opencomposer.bench.rows import Row
from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine, StepTiming
from opencomposer.serving.engines.embedded.loader import SPECULATIVE_FILE
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.packed_linear import pack_linears, packing_available
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, SpecStats

BATCH_SIZES = (1, 4, 16)
PREFILL_TOKENS = 512
SYNTHETIC_PROMPT_TOKENS = 32
SEED = 0
FEW_ACCEPTED = 0.2
"""Below this acceptance rate the note says speculation cannot pay (random weights)."""

PROMPT_TEXTS = (
    'def fibonacci(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n',
    "Explain in two sentences why a hash map lookup takes constant time on average.",
    "import json\nfrom pathlib import Path\n\n\ndef load_config(path: Path) -> dict:\n",
    "Write a Python function that reads a CSV file and returns its rows as dictionaries.",
    "class Stack:\n    def __init__(self) -> None:\n        self.items = []\n\n    def push(",
    "What is the difference between a process and a thread? Answer briefly.",
    "async def fetch_all(urls: list[str]) -> list[bytes]:\n    async with httpx.AsyncClient(",
    "Fix the bug: `for i in range(len(xs)): if xs[i] = target: return i` raises a SyntaxError.",
)
"""Prompts of a model with a tokenizer.json; past these, a numbered copy leads, so no two
prompts share a first KV block (the prefix cache would skip their prefill)."""


class BenchError(Exception):
    """Sizes this model cannot run; the message says which."""


@dataclass
class Timing:
    """One run of requests to completion."""

    seconds: float
    outputs: list[list[int]]
    e2e: list[float]
    """Per request: from its start to its last token."""

    ttft: list[float] | None = None
    """Per request: from its start to its first token (None: not observable)."""

    spec: SpecStats | None = None
    """Speculation totals over the requests."""

    decode_steps: list[StepTiming] = field(default_factory=list)
    """The engine's steps without a prompt in them, in order."""

    @property
    def mean_step(self) -> StepTiming | None:
        """The mean decode step (None: no decode step ran)."""
        steps = self.decode_steps
        if not steps:
            return None
        return StepTiming(
            statistics.mean(step.seconds for step in steps),
            statistics.mean(step.drafting for step in steps),
            decoding=True,
        )

    @property
    def tokens(self) -> int:
        return sum(len(output) for output in self.outputs)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds

    @property
    def tpot(self) -> float | None:
        """Mean over requests of (E2E - TTFT) / (output tokens - 1)."""
        if self.ttft is None:
            return None
        per_request = [
            (end - first) / (len(out) - 1)
            for out, first, end in zip(self.outputs, self.ttft, self.e2e, strict=True)
            if len(out) > 1
        ]
        return statistics.mean(per_request) if per_request else None


@dataclass
class Prompts:
    decode: list[list[int]]
    """Distinct prompts, at least as many as the largest batch."""

    long: list[int]
    """The prefill prompt."""

    source: str


def make_prompts(folder: Path, model: CausalLM, count: int) -> Prompts:
    """`count` prompts from PROMPT_TEXTS when the model has a tokenizer.json, else seeded
    random token ids; the long prompt is the texts run together (or random ids), cut to
    PREFILL_TOKENS or what the context allows."""
    long_length = min(PREFILL_TOKENS, model.max_positions - 1)
    tokenizer_file = folder / "tokenizer.json"
    if not tokenizer_file.is_file():
        gen = torch.Generator().manual_seed(SEED)
        decode = [
            torch.randint(model.vocab_size, (SYNTHETIC_PROMPT_TOKENS,), generator=gen).tolist()
            for _ in range(count)
        ]
        random_long = torch.randint(model.vocab_size, (long_length,), generator=gen).tolist()
        return Prompts(decode, random_long, f"random token ids (seed {SEED})")
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    texts = [PROMPT_TEXTS[i % len(PROMPT_TEXTS)] for i in range(count)]
    texts = [
        text if i < len(PROMPT_TEXTS) else f"{i // len(PROMPT_TEXTS)}. {text}"
        for i, text in enumerate(texts)
    ]
    decode = [tokenizer.encode(text).ids for text in texts]
    long: list[int] = []
    while len(long) < long_length:
        long += tokenizer.encode("\n\n".join(PROMPT_TEXTS)).ids
    return Prompts(decode, long[:long_length], "fixed code and English prompts, tokenized")


def engine_config(prompts: Prompts, max_tokens: int, draft_tokens: int) -> EngineConfig:
    """A cache for every decode prompt at once, or the long prompt, with room to spare."""
    block = EngineConfig.block_size
    per_sequence = [len(p) + max_tokens + draft_tokens + block for p in prompts.decode]
    slots = max(sum(per_sequence), len(prompts.long) + block)
    return EngineConfig(
        kv_cache_tokens=-(-slots // block) * block,
        max_batch_tokens=max(EngineConfig.max_batch_tokens, len(prompts.long)),
        max_seqs=max(EngineConfig.max_seqs, len(prompts.decode)),
    )


def run_engine(
    model: CausalLM,
    config: EngineConfig,
    prompts: list[list[int]],
    options: SamplingOptions,
    *,
    batch: int,
) -> Timing:
    """`prompts` on a fresh engine, `batch` at a time (each group runs to completion before
    the next starts), stepping the engine ourselves to see when each request gets its first
    and last token."""
    llm = LLMEngine(model, config)
    outputs: list[list[int]] = []
    ttft: list[float] = []
    e2e: list[float] = []
    spec = SpecStats()
    decode_steps: list[StepTiming] = []
    seconds = 0.0
    for start in range(0, len(prompts), batch):
        began = time.perf_counter()
        seqs = [llm.add(prompt, options) for prompt in prompts[start : start + batch]]
        first: dict[int, float] = {}
        last: dict[int, float] = {}
        while llm.has_work():
            advanced = llm.step()
            now = time.perf_counter() - began
            if advanced and llm.last_step is not None and llm.last_step.decoding:
                decode_steps.append(llm.last_step)
            for seq in advanced:
                if seq.output_ids:
                    first.setdefault(seq.id, now)
                if seq.finished:
                    last.setdefault(seq.id, now)
        seconds += time.perf_counter() - began
        for seq in seqs:
            outputs.append(seq.output_ids)
            ttft.append(first[seq.id])
            e2e.append(last[seq.id])
            spec.verify_steps += seq.spec.verify_steps
            spec.drafted += seq.spec.drafted
            spec.accepted += seq.spec.accepted
    return Timing(seconds, outputs, e2e, ttft, spec, decode_steps)


def interleaved(runs: dict[str, Callable[[], Timing]], repeat: int) -> dict[str, Timing]:
    """`repeat` rounds of every run in turn, so a burst of load from other processes falls on
    baseline and ours alike rather than on one figure; for each, the run of median wall time
    (all of its figures come from that one run)."""
    timings: dict[str, list[Timing]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            timings[name].append(run())
    return {
        name: sorted(done, key=lambda timing: timing.seconds)[len(done) // 2]
        for name, done in timings.items()
    }


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes there, KiB here


def load_transformers(folder: Path, device: torch.device, dtype: torch.dtype) -> tuple[Any, str]:
    """(transformers' model of the folder, "") or (None, why not)."""
    try:
        import transformers
    except ImportError as exc:
        return None, f"transformers is not importable ({exc})"
    transformers.logging.set_verbosity_error()  # its load report lists our MTP weights
    transformers.utils.logging.disable_progress_bar()
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        return None, f"transformers cannot load {folder.name} ({exc})"
    model.generation_config.eos_token_id = None  # fixed output length, as ours
    # transformers declares `to` through functools.wraps, whose stub type does not bind self.
    return model.to(device).eval(), ""  # type: ignore[arg-type]


def transformers_generate(
    model: Any, prompts: list[list[int]], max_tokens: int, device: torch.device
) -> Timing:
    """Greedy `generate`, one prompt at a time."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=max_tokens, do_sample=False, pad_token_id=model.config.pad_token_id or 0
    )
    outputs, e2e = [], []
    for prompt in prompts:
        ids = torch.tensor([prompt], device=device)
        began = time.perf_counter()
        generated = model.generate(
            ids, attention_mask=torch.ones_like(ids), generation_config=config
        )[0, len(prompt) :].tolist()
        e2e.append(time.perf_counter() - began)
        outputs.append(generated)
    return Timing(sum(e2e), outputs, e2e)


@torch.inference_mode()
def transformers_prefill(model: Any, prompt: list[int], device: torch.device) -> Timing:
    ids = torch.tensor([prompt], device=device)
    began = time.perf_counter()
    token = model(ids, logits_to_keep=1).logits[0, -1].argmax().item()
    seconds = time.perf_counter() - began
    return Timing(seconds, [[token]], [seconds])


def first_difference(ours: list[list[int]], theirs: list[list[int]]) -> str:
    """Where two runs' outputs first differ ("" when they do not)."""
    for request, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a != b:
            at = next(
                (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)),
            )
            return f"request {request}, token {at}"
    return ""


def spec_rows(plain: Timing, specs: dict[int, Timing], whole_vocab: Timing | None) -> list[Row]:
    """Per number of drafts k: output speed beside plain greedy (outputs must be identical)
    and tokens per verify step; then TPOT at the fastest k, and, for a model that drafts from
    a reduced vocabulary, the largest k again drafting from the whole vocabulary."""
    rows: list[Row] = []
    for k, spec in specs.items():
        stats = spec.spec or SpecStats()
        rows.append(_spec_speed(f"MTP k={k}: output tokens/s", plain, spec, k))
        rows.append(
            Row(
                f"MTP k={k}: acceptance length",
                "no drafts",
                1.0,
                stats.accept_length,
                "tokens",
                f"tokens per verify step (at most {k + 1}); "
                f"{stats.accepted} of {stats.drafted} drafts accepted",
            )
        )
        rows.append(_step_cost(k, plain, spec))
    best = max(specs, key=lambda k: specs[k].tokens_per_second)
    fastest = specs[best]
    rows.append(
        Row(
            "MTP: TPOT",
            "plain greedy",
            plain.tpot,
            fastest.tpot,
            "s",
            f"k={best}, the fastest; speed-up {plain.tpot / fastest.tpot:.2f}x (baseline / ours)"
            if plain.tpot and fastest.tpot
            else f"k={best}",
        )
    )
    if whole_vocab is not None:
        k = max(specs)
        rows.append(
            _spec_speed(
                f"MTP k={k}, whole-vocabulary drafts: output tokens/s", plain, whole_vocab, k
            )
        )
    return rows


def _step_cost(draft_tokens: int, plain: Timing, spec: Timing) -> Row:
    """Where a speculating step's time goes, beside a plain decode step: the speed-up is the
    tokens a step yields over what it costs (the ratio), whatever the drafts' quality."""
    step, baseline = spec.mean_step, plain.mean_step
    note = "no decode steps measured"
    if step is not None:
        note = (
            f"drafts {step.drafting * 1000:.2f} ms, then the forward over {draft_tokens + 1} "
            f"tokens and the verdict {(step.seconds - step.drafting) * 1000:.2f} ms"
        )
        if baseline is not None:
            cost = step.seconds / baseline.seconds
            accept = (spec.spec or SpecStats()).accept_length
            note += f"; {accept:.2f} tokens per step / {cost:.2f} = {accept / cost:.2f}x"
    return Row(
        f"MTP k={draft_tokens}: decode step",
        "plain decode step",
        baseline.seconds if baseline else None,
        step.seconds if step else None,
        "s",
        note,
    )


def _spec_speed(name: str, plain: Timing, spec: Timing, draft_tokens: int) -> Row:
    identical = spec.outputs == plain.outputs
    note = (
        f"{draft_tokens} drafts a step; outputs identical"
        if identical
        else f"outputs DIFFER at {first_difference(spec.outputs, plain.outputs)}: greedy "
        "speculation must be lossless"
    )
    stats = spec.spec or SpecStats()
    note += f"; {stats.accept_length:.2f} tokens per verify step"
    if (stats.accept_rate or 0.0) < FEW_ACCEPTED:
        note += "; few drafts accepted (random weights?), so a speed-up near or below 1 is expected"
    return Row(
        name,
        "plain greedy",
        plain.tokens_per_second,
        spec.tokens_per_second,
        "tok/s",
        note,
        identical,
    )


def run_engine_bench(
    model: CausalLM,
    folder: Path,
    *,
    prompts: int,
    max_tokens: int,
    draft_tokens: int,
    repeat: int,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[list[Row], dict[str, Any]]:
    """Every measurement above, for `model` just loaded from the checkpoint `folder`: our
    engine's runs first (then the memory figures), then transformers' beside ours again."""
    parameter = next(model.parameters())
    device, dtype = parameter.device, parameter.dtype
    rss_loaded = peak_rss_mb()
    weights_cuda = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    inputs = make_prompts(folder, model, max(prompts, *BATCH_SIZES))
    longest = max(len(prompt) for prompt in inputs.decode) + max_tokens + draft_tokens
    if longest > model.max_positions:
        raise BenchError(
            f"{max_tokens} output tokens after prompts of up to "
            f"{longest - max_tokens - draft_tokens} tokens exceed the model's "
            f"context ({model.max_positions} positions)"
        )
    config = engine_config(inputs, max_tokens, draft_tokens)
    chosen = inputs.decode[:prompts]
    plain = SamplingOptions(max_tokens=max_tokens)

    def ours(
        batch_prompts: list[list[int]], options: SamplingOptions, batch: int = 1
    ) -> Callable[[], Timing]:
        """A timed run as the engine serves it: on CPU, weights packed for a verify's rows
        while speculating (`packed_linear`), plain otherwise (untimed, before each run)."""
        rows = options.draft_tokens + 1 if options.draft_tokens and device.type == "cpu" else 0

        def run(prompts: list[list[int]], size: int) -> Timing:
            pack_linears(model, rows)
            return run_engine(model, config, prompts, options, batch=size)

        run(batch_prompts[:1], 1)  # warm-up
        return lambda: run(batch_prompts, batch)

    progress("warming up")
    runs = {"plain": ours(chosen, plain)}
    drafting = range(1, draft_tokens + 1) if model.num_mtp_layers else range(0)
    for k in drafting:
        runs[f"spec {k}"] = ours(chosen, SamplingOptions(max_tokens=max_tokens, draft_tokens=k))
    if drafting and model.draft_token_ids is not None:
        runs["spec whole vocab"] = _without_draft_vocab(
            model, ours(chosen, SamplingOptions(max_tokens=max_tokens, draft_tokens=draft_tokens))
        )
    for size in BATCH_SIZES[1:]:
        runs[f"batch {size}"] = ours(inputs.decode[:size], plain, size)
    runs["prefill"] = ours([inputs.long], SamplingOptions(max_tokens=1))
    progress(f"{', '.join(runs)}: {repeat} rounds")
    timed = interleaved(runs, repeat)
    plain_speed = timed["plain"].tokens_per_second  # what the MTP rows divide by
    rows = (
        spec_rows(
            timed["plain"],
            {k: timed[f"spec {k}"] for k in drafting},
            timed.get("spec whole vocab"),
        )
        if drafting
        else [
            Row(
                "MTP: output tokens/s",
                "plain greedy",
                timed["plain"].tokens_per_second,
                None,
                "tok/s",
                f"skipped: {type(model).__name__} has no MTP layer",
            )
        ]
    )
    rows += [
        Row(
            f"batch {size}: output tokens/s",
            "batch 1",
            timed["plain"].tokens_per_second,
            timed[f"batch {size}"].tokens_per_second,
            "tok/s",
            f"{size} requests at once, all their tokens",
        )
        for size in BATCH_SIZES[1:]
    ]
    memory = [
        Row(
            "peak RSS",
            "after loading",
            rss_loaded,
            peak_rss_mb(),
            "MB",
            f"ru_maxrss; a KV cache of {config.kv_cache_tokens} slots",
        )
    ]
    if device.type == "cuda":
        memory.append(
            Row(
                "peak CUDA memory",
                "weights",
                weights_cuda / 2**20,
                torch.cuda.max_memory_allocated(device) / 2**20,
                "MB",
                "torch.cuda.max_memory_allocated",
            )
        )

    progress("transformers: loading the same weights")
    reference, why_not = load_transformers(folder, device, dtype)
    if reference is not None:
        transformers_generate(reference, chosen[:1], min(4, max_tokens), device)  # warm-up
        transformers_prefill(reference, inputs.long, device)
        progress(f"transformers beside ours: {repeat} rounds")
        timed |= interleaved(
            {
                "plain": runs["plain"],
                "prefill": runs["prefill"],
                "theirs": lambda: transformers_generate(reference, chosen, max_tokens, device),
                "their prefill": lambda: transformers_prefill(reference, inputs.long, device),
            },
            repeat,
        )
    rows.append(versus_transformers(timed["plain"], timed.get("theirs"), why_not))
    their_prefill = timed.get("their prefill")
    rows.append(
        Row(
            f"prefill {len(inputs.long)}: tokens/s",
            "transformers",
            len(inputs.long) / their_prefill.seconds if their_prefill else None,
            len(inputs.long) / timed["prefill"].seconds,
            "tok/s",
            "to the first token" if their_prefill else f"baseline skipped: {why_not}",
        )
    )
    rows += memory

    info = {
        "model": folder.name,
        "folder": str(folder),
        "family": type(model).__name__,
        "device": str(device),
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "prompt_source": inputs.source,
        "prompts": prompts,
        "prompt_tokens": statistics.mean(len(p) for p in chosen),
        "prefill_tokens": len(inputs.long),
        "max_tokens": max_tokens,
        "draft_tokens": draft_tokens if model.num_mtp_layers else 0,
        "packed_verify": device.type == "cpu" and packing_available(),
        "repeat": repeat,
    }
    if drafting:
        info["draft_speedups"] = {
            k: timed[f"spec {k}"].tokens_per_second / plain_speed for k in drafting
        }
    return rows, info


def save_draft_tokens(folder: Path, info: dict[str, Any]) -> Path:
    """Write the fastest number of drafts of a bench (0 when none beat plain decoding) into
    the model's folder, with what it was measured on (`loader.SPECULATIVE_FILE`)."""
    speedups: dict[int, float] = info["draft_speedups"]
    best = max(speedups, key=lambda k: speedups[k])
    record = {
        "draft_tokens": best if speedups[best] > 1 else 0,
        "speedup_over_plain": {str(k): round(v, 3) for k, v in speedups.items()},
        "measured_on": {
            "device": info["device"],
            "dtype": info["dtype"],
            "threads": info["threads"],
            "max_tokens": info["max_tokens"],
            "prompt_source": info["prompt_source"],
        },
    }
    path = folder / SPECULATIVE_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=2) + "\n")
    temporary.replace(path)
    return path


def _without_draft_vocab(model: CausalLM, run: Callable[[], Timing]) -> Callable[[], Timing]:
    """`run` with the model drafting from its whole vocabulary."""
    ids = model.draft_token_ids

    def whole() -> Timing:
        model.draft_token_ids = None
        try:
            return run()
        finally:
            model.draft_token_ids = ids

    return whole


def versus_transformers(ours: Timing, theirs: Timing | None, why_not: str) -> Row:
    name = "generate: output tokens/s"
    if theirs is None:
        return Row(
            name,
            "transformers",
            None,
            ours.tokens_per_second,
            "tok/s",
            f"baseline skipped: {why_not}",
        )
    identical = ours.outputs == theirs.outputs
    note = (
        "batch 1; outputs identical"
        if identical
        else (f"batch 1; outputs differ at {first_difference(ours.outputs, theirs.outputs)}")
    )
    return Row(
        name,
        "transformers",
        theirs.tokens_per_second,
        ours.tokens_per_second,
        "tok/s",
        note,
        identical,
    )
