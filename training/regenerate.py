"""The model's own greedy answers as MTP training data: what EAGLE and SpecForge call
regenerating the data with the target model.

A draft is accepted when it equals what the model itself emits next, so the best text for a
draft head is the model's own output, not the corpus's: greedy continuations are more regular
than human text, and they are the contexts the head meets when serving. The prompts come from
a corpus `opencomposer train data` built (its train split: licence-filtered, deduplicated), of
three kinds:

- code: a file cut after a line, its last lines given raw for the model to continue;
- prose: Markdown or reStructuredText cut after a paragraph, given raw;
- chat: a user turn in the model's chat template, about a Python function of the corpus that
  has a docstring: write it from its signature and summary, or explain its source.

The engine decodes them greedily in batches, each until its end of turn or `max_tokens`; a
sample is written as a text file, prompt then answer, special tokens spelled out (the
tokenizer reads them back as themselves), which `opencomposer train mtp --data` reads.

Sample i's prompt depends only on the seed and i, and a sample is written whole (a temporary
file renamed into place), so a rerun resumes after the samples already on disk and a larger
`count` extends the same set.
"""

import ast
import json
import random
import textwrap
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from opencomposer.serving.engines.base import ChatMessage
from opencomposer.serving.engines.embedded.chat_format import ChatFormat
from opencomposer.serving.engines.embedded.engine import EngineConfig, LLMEngine
from opencomposer.serving.engines.embedded.fim import TextPrompts
from opencomposer.serving.engines.embedded.models.base import CausalLM
from opencomposer.serving.engines.embedded.sequence import SamplingOptions
from opencomposer.training.errors import TrainingError

PROSE_LANGUAGES = frozenset({"markdown", "restructuredtext"})
KINDS = ("code", "prose", "chat")
PROMPT_LINES = 24
"""Lines (or paragraphs, for prose) at most before the cut."""

PROMPT_CHARS = 1200
"""A prompt's text at most: its tail is kept (what the model continues from)."""

FUNCTION_CHARS = 1500
"""Longest function source an "explain" prompt shows."""

SETTINGS_FILE = "regenerate.json"


@dataclass(frozen=True)
class Sources:
    """Prompt material from a corpus: the texts of each kind, and the documented functions."""

    code: list[str]
    prose: list[str]
    functions: list[tuple[str, str, str]]
    """(signature, docstring summary, source) of Python functions with a docstring."""

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> "Sources":
        code, prose, functions = [], [], []
        for record in records:
            text, language = record["text"], record.get("language")
            if language in PROSE_LANGUAGES:
                prose.append(text)
                continue
            code.append(text)
            if language == "python":
                functions += documented_functions(text)
        if not code:
            raise TrainingError("the corpus has no code to draw prompts from")
        return cls(code, prose, functions)


def documented_functions(source: str) -> list[tuple[str, str, str]]:
    """(signature, summary, source) of each function in `source` with a docstring whose first
    line says something; a file that does not parse has none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines(keepends=True)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        summary = (ast.get_docstring(node) or "").strip().split("\n", 1)[0].strip()
        if len(summary) < 12 or node.name.startswith("_") or node.end_lineno is None:
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        body = textwrap.dedent("".join(lines[first - 1 : node.end_lineno])).rstrip("\n")
        found.append((f"{node.name}({ast.unparse(node.args)})", summary, body))
    return found


@dataclass(frozen=True)
class Prompt:
    kind: str
    text: str


def make_prompt(sources: Sources, chat: ChatFormat, seed: int, index: int) -> Prompt:
    """Sample `index`'s prompt: a function of the seed and the index alone."""
    rng = random.Random(f"{seed}:{index}")
    kinds = [k for k in KINDS if k != "prose" or sources.prose]
    kinds = [k for k in kinds if k != "chat" or sources.functions]
    kind = rng.choice(kinds)
    if kind == "chat":
        return Prompt(kind, chat.render([ChatMessage(role="user", content=_ask(sources, rng))], []))
    if kind == "prose":
        pieces = rng.choice(sources.prose).split("\n\n")
        cut = rng.randint(1, len(pieces))
        text = "\n\n".join(pieces[max(0, cut - PROMPT_LINES) : cut]) + "\n\n"
    else:
        lines = rng.choice(sources.code).splitlines(keepends=True)
        cut = rng.randint(1, len(lines)) if lines else 0
        text = "".join(lines[max(0, cut - PROMPT_LINES) : cut])
    return Prompt(kind, text[-PROMPT_CHARS:] or "\n")


def _ask(sources: Sources, rng: random.Random) -> str:
    signature, summary, body = rng.choice(sources.functions)
    asks = (
        f"Write a Python function `{signature}`: {summary}",
        f"{summary.rstrip('.')}. How would I do that in Python?",
        f"Explain what this function does:\n\n```python\n{body[:FUNCTION_CHARS]}\n```",
    )
    return rng.choice(asks)


@dataclass(frozen=True)
class RegenerateConfig:
    count: int = 2000
    max_tokens: int = 192
    batch: int = 16
    seed: int = 0


@dataclass
class RegenerateResult:
    written: int = 0
    """Samples this run wrote."""

    kept: int = 0
    """Samples already on disk, left as they were."""

    prompt_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    kinds: dict[str, int] | None = None
    """Samples this run wrote, by kind."""


def regenerate(
    model: CausalLM,
    tokenizer: Tokenizer,
    chat: ChatFormat,
    sources: Sources,
    out: Path,
    *,
    model_name: str,
    config: RegenerateConfig = RegenerateConfig(),
    on_batch: Callable[[RegenerateResult], None] | None = None,
) -> RegenerateResult:
    """Write samples 0 .. count - 1 of `config.seed` that `out` lacks; see the module."""
    if config.count < 1 or config.max_tokens < 1 or config.batch < 1:
        raise TrainingError("count, max tokens and batch must be positive")
    out.mkdir(parents=True, exist_ok=True)
    _check_settings(out, {"model": model_name, "seed": config.seed})
    chat_stops = [tokenizer.token_to_id(text) for text in chat.stop]
    stops = TextPrompts(tokenizer, [t for t in chat_stops if t is not None]).stop_ids
    options = SamplingOptions(max_tokens=config.max_tokens, stop_token_ids=stops)
    result = RegenerateResult(kinds={kind: 0 for kind in KINDS})
    missing = [i for i in range(config.count) if not _sample_path(out, i).is_file()]
    result.kept = config.count - len(missing)
    prompts = {i: make_prompt(sources, chat, config.seed, i) for i in missing}
    encoded = {
        i: tokenizer.encode(p.text, add_special_tokens=False).ids for i, p in prompts.items()
    }
    longest = max((len(ids) for ids in encoded.values()), default=0)
    block = EngineConfig.block_size
    per_sequence = -(-(longest + config.max_tokens + block) // block) * block
    engine = LLMEngine(
        model,
        EngineConfig(
            kv_cache_tokens=config.batch * per_sequence,
            max_seqs=config.batch,
            max_batch_tokens=max(EngineConfig.max_batch_tokens, longest),
        ),
    )
    started = time.perf_counter()
    for first in range(0, len(missing), config.batch):
        indices = missing[first : first + config.batch]
        seqs = engine.generate([encoded[i] for i in indices], options)
        for index, seq in zip(indices, seqs, strict=True):
            answer = tokenizer.decode(seq.output_ids, skip_special_tokens=False)
            _write(_sample_path(out, index), prompts[index].text + answer)
            result.prompt_tokens += len(encoded[index])
            result.output_tokens += len(seq.output_ids)
            result.kinds[prompts[index].kind] += 1  # type: ignore[index]
        result.written += len(indices)
        result.seconds = time.perf_counter() - started
        if on_batch is not None:
            on_batch(result)
    return result


def _sample_path(out: Path, index: int) -> Path:
    return out / f"{index:07d}.txt"


def _write(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.rename(path)


def _check_settings(out: Path, settings: dict[str, Any]) -> None:
    """A folder holds the samples of one model and seed: resuming with others is refused."""
    path = out / SETTINGS_FILE
    if path.is_file():
        before = json.loads(path.read_text())
        if before != settings:
            raise TrainingError(
                f"{out} holds samples of {before}; this run asks for {settings}: "
                "choose another --out"
            )
        return
    path.write_text(json.dumps(settings, indent=1) + "\n")
