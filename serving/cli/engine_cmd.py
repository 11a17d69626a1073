"""`opencomposer engine generate|logits|bench`: one streamed generation from the configured
engine; the embedded engine's logits for given tokens; its speed beside baselines.

`logits` and `bench` load torch and the model only inside their functions, so the CLI starts
fast. Their input errors are one line on stderr and exit status 2.
"""

import asyncio
import json as jsonlib
import os
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from opencomposer.config import Settings
from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.options import (
    FLAG,
    ConfigOverrides,
    EngineSpec,
    Json,
    Workspace,
    engine_overrides,
    given,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err, print_json
from opencomposer.serving.engines import make_engine
from opencomposer.serving.engines.base import (
    ChatMessage,
    Finished,
    GenerationRequest,
    GenerationResult,
    ReasoningDelta,
    SamplingParams,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
    ToolSpec,
)
from opencomposer.serving.engines.errors import EngineProtocolError, EngineUnavailable
from opencomposer.terminal_text import for_terminal

if TYPE_CHECKING:
    import numpy as np

    from opencomposer.serving.engines.embedded.models.base import CausalLM

engine_app = CommandApp(help="Talk to the model engine directly.", no_args_is_help=True)


def _load_tools(path: Path | None) -> list[ToolSpec]:
    """Tools from a JSON file: a list of OpenAI tool objects or of {name, description,
    parameters}."""
    if path is None:
        return []
    try:
        raw = jsonlib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--tools") from None
    if not isinstance(raw, list):
        raise typer.BadParameter(f"{path}: expected a JSON list of tools", param_hint="--tools")
    try:
        return [ToolSpec.model_validate(t.get("function", t)) for t in raw]
    except (AttributeError, ValueError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--tools") from None


@engine_app.command("generate")
def generate(
    prompt: Annotated[str, typer.Argument(help="The user message.", metavar="PROMPT")],
    system: Annotated[str | None, typer.Option(help="A system message.")] = None,
    tools: Annotated[
        Path | None, typer.Option(help="JSON file of tools the model may call.", exists=True)
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1)] = 512,
    temperature: Annotated[float | None, typer.Option(min=0.0)] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    engine: EngineSpec = None,
    base_url: Annotated[
        str | None, typer.Option(help="An OpenAI-compatible server (same as --engine openai:URL).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Sets engine.model.")] = None,
    spec: Annotated[
        str | None,
        typer.Option(help="Speculative decoding in the embedded engine: mtp, none or auto."),
    ] = None,
    draft_tokens: Annotated[
        int | None, typer.Option(min=1, max=8, help="Tokens the MTP layer drafts per step.")
    ] = None,
    workspace: Workspace = None,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """Stream one completion: text to stdout, reasoning and statistics to stderr."""
    if spec is not None and spec not in ("mtp", "none", "auto"):
        raise typer.BadParameter("use mtp, none or auto", param_hint="--spec")
    flags = engine_overrides(engine if base_url is None else f"openai:{base_url}")
    flags.update(
        given(
            {"engine.model": model, "engine.speculative": spec, "engine.draft_tokens": draft_tokens}
        )
    )
    loaded = settings_for(workspace, overrides_from(config, **flags))
    messages = [ChatMessage(role="system", content=system)] if system else []
    messages.append(ChatMessage(role="user", content=prompt))
    request = GenerationRequest(
        messages=messages,
        tools=_load_tools(tools),
        sampling=SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed),
    )
    result, stats = asyncio.run(_stream(loaded.settings, request, echo=not json))
    if json:
        print_json({**result.to_json(), "stats": stats})
    else:
        err.print(
            f"[dim]{stats['completion_tokens']} tokens in {stats['seconds']:.2f}s "
            f"({stats['tokens_per_second']:.1f} tok/s, first token after "
            f"{stats['first_token_seconds']:.2f}s), finish: {result.finish_reason}[/]"
        )
        if result.spec is not None:
            rate = (
                f", {result.spec.accept_rate:.0%} of drafts accepted"
                if (result.spec.accept_rate is not None)
                else ""
            )
            err.print(
                f"[dim]MTP: {result.spec.accept_length:.2f} tokens per verify step over "
                f"{result.spec.verify_steps} steps{rate}[/]"
            )


async def _stream(
    settings: Settings, request: GenerationRequest, echo: bool
) -> tuple[GenerationResult, dict[str, float]]:
    engine = make_engine(settings.engine, settings.models_dir)
    started = time.perf_counter()
    first: float | None = None
    result: GenerationResult | None = None
    try:
        async with aclosing(engine.generate(request)) as events:
            async for event in events:
                if first is None and not isinstance(event, Finished):
                    first = time.perf_counter() - started
                if isinstance(event, Finished):
                    result = event.result
                elif echo:
                    _echo(event)
    finally:
        await engine.aclose()
    if result is None:
        raise EngineProtocolError("the engine's stream ended without a result")
    if echo:
        print(flush=True)
    seconds = time.perf_counter() - started
    tokens = result.usage.completion_tokens if result.usage else 0
    stats = {
        "seconds": seconds,
        "first_token_seconds": first or seconds,
        "completion_tokens": tokens,
        "tokens_per_second": tokens / seconds if seconds > 0 else 0.0,
    }
    return result, stats


def _echo(event: Any) -> None:
    if isinstance(event, TextDelta):
        print(for_terminal(event.text), end="", flush=True)
    elif isinstance(event, ReasoningDelta):
        err.print(event.text, end="", style="dim italic", markup=False)
    elif isinstance(event, ToolCallStarted):
        print(for_terminal(f"\n[call {event.name} {event.id}] "), end="", flush=True)
    elif isinstance(event, ToolCallArgumentsDelta):
        print(for_terminal(event.text), end="", flush=True)


Device = Annotated[
    str | None,
    typer.Option(help="Where the embedded engine runs: cpu, cuda or auto (sets engine.device)."),
]
Dtype = Annotated[
    str | None, typer.Option(help="float32, bfloat16, float16 or auto (sets engine.dtype).")
]


def _fail(message: str) -> NoReturn:
    # A plain write, like app.main's: one line that scripts can grep, never re-wrapped.
    sys.stderr.write(f"opencomposer: {message}\n")
    raise typer.Exit(2)


def _model_folder(settings: Settings, name: str | None) -> tuple[str, Path]:
    """(name, folder) of a registry name in models_dir or a Hugging Face folder, as the
    embedded engine resolves engine.model."""
    from opencomposer.config import EngineSettings
    from opencomposer.serving.engines.embedded.service import resolve_model

    try:
        return resolve_model(EngineSettings(model=name), settings.models_dir)
    except EngineUnavailable as exc:
        _fail(exc.message)


def _load(settings: Settings, name: str, folder: Path, *, mtp: bool = True) -> "CausalLM":
    from opencomposer.serving.engines.embedded.loader import ModelLoadError, load_model
    from opencomposer.serving.engines.embedded.service import choose_device, choose_dtype

    device = choose_device(settings.engine.device)
    try:
        return load_model(
            folder, device=device, dtype=choose_dtype(settings.engine.dtype, device), mtp=mtp
        )
    except (ModelLoadError, OSError) as exc:
        _fail(f"cannot load model {name!r}: {exc}")


def _parse_tokens(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        _fail(f"--tokens: expected token ids separated by commas, like 1,2,3; got {text!r}")
    if any(token < 0 for token in ids):
        _fail(f"--tokens: token ids are not negative; got {text!r}")
    return ids


def _save_npy(path: Path, array: "np.ndarray") -> None:
    """Write through a temporary file beside `path`, then rename: no reader sees half a file."""
    import numpy as np

    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        with os.fdopen(fd, "wb") as file:
            np.save(file, array)
        os.chmod(scratch, 0o666 & ~umask)  # mkstemp's 0600 would outlive the rename
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def _full_logits(
    model: "CausalLM", ids: list[int], mtp: bool
) -> tuple["np.ndarray", "np.ndarray | None"]:
    """float32 logits [T, vocab] of one forward over `ids` in a scratch cache and, with `mtp`,
    the MTP layer's [T - 1, vocab] (hidden state i with token i + 1 predicts token i + 2)."""
    import torch

    from opencomposer.serving.engines.embedded.attention import ForwardContext

    device = next(model.parameters()).device

    def context(length: int) -> ForwardContext:
        ctx = ForwardContext.contiguous([length])
        ctx.positions = ctx.positions.to(device)
        ctx.slot_mapping = ctx.slot_mapping.to(device)
        ctx.gather_indices = [g.to(device) for g in ctx.gather_indices]
        return ctx

    with torch.inference_mode():
        model.allocate_kv_cache(len(ids))
        tokens = torch.tensor(ids, dtype=torch.long, device=device)
        hidden = model(tokens, context(len(ids)))
        logits = model.compute_logits(hidden).cpu().numpy()
        if not mtp:
            return logits, None
        if len(ids) == 1:
            return logits, logits[:0]
        states = model.mtp_forward(tokens[1:], hidden[:-1], context(len(ids) - 1))
        return logits, model.compute_logits(states).cpu().numpy()


@engine_app.command("logits")
def logits(
    tokens: Annotated[str, typer.Option(help="Token ids separated by commas, e.g. 1,2,3.")],
    out_file: Annotated[
        Path,
        typer.Option(
            "--out", help="The .npy file to write: float32 logits [tokens, vocab].", dir_okay=False
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option(help="A model name or a Hugging Face folder (default: engine.model)."),
    ] = None,
    mtp: Annotated[
        bool,
        typer.Option(
            help="Also write the MTP layer's logits [tokens - 1, vocab] to FILE.mtp.npy.",
            metavar=FLAG,
        ),
    ] = False,
    device: Device = None,
    dtype: Dtype = None,
    config: ConfigOverrides = None,
) -> None:
    """One full forward over the tokens; writes the logits of every position."""
    ids = _parse_tokens(tokens)
    if not out_file.parent.is_dir():
        _fail(f"--out: no folder {out_file.parent}")
    settings = settings_for(
        None, overrides_from(config, **{"engine.device": device, "engine.dtype": dtype})
    ).settings
    name, folder = _model_folder(settings, model or settings.engine.model)
    llm = _load(settings, name, folder, mtp=mtp)
    if max(ids) >= llm.vocab_size:
        _fail(
            f"--tokens: token id {max(ids)} is outside the vocabulary of {name} "
            f"({llm.vocab_size} ids)"
        )
    if len(ids) > llm.max_positions:
        _fail(
            f"--tokens: {len(ids)} tokens, longer than the context of {name} ({llm.max_positions})"
        )
    has_mtp = mtp and llm.num_mtp_layers > 0
    main, drafts = _full_logits(llm, ids, has_mtp)
    _save_npy(out_file, main)
    print(f"logits: float32 {list(main.shape)} -> {out_file}")
    print(f"last-row argmax: {int(main[-1].argmax())}")
    mtp_file = out_file.with_name(out_file.name.removesuffix(".npy") + ".mtp.npy")
    if drafts is not None:
        _save_npy(mtp_file, drafts)
        print(f"MTP logits: float32 {list(drafts.shape)} -> {mtp_file}")
    elif mtp:
        err.print(f"{name} has no MTP layer: no {mtp_file.name} written")


def _bench_model(models_dir: Path) -> str:
    from opencomposer.serving import model_store as store

    for name in ("tiny-moe", "smollm2-135m"):
        if store.is_installed(models_dir, name):
            return name
    _fail(
        "no model to benchmark: create one with `opencomposer models init tiny-moe` or "
        "fetch one with `opencomposer models pull smollm2-135m`, or pass --model"
    )


@engine_app.command("bench")
def bench(
    model: Annotated[
        str | None,
        typer.Option(
            help="A model name or folder (default: tiny-moe when installed, else smollm2-135m)."
        ),
    ] = None,
    prompts: Annotated[
        int, typer.Option(min=1, help="Requests of the one-at-a-time comparisons.")
    ] = 4,
    max_tokens: Annotated[
        int, typer.Option(min=2, help="Output tokens of every request (end-of-sequence ignored).")
    ] = 32,
    draft_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=8,
            help="Measure MTP drafting 1, 2, ... up to this many tokens per step "
            "(default: engine.draft_tokens, else the model's own choice and at least 3).",
        ),
    ] = None,
    save: Annotated[
        bool,
        typer.Option(
            "--save",
            help="Write the fastest number of drafts into the model's folder "
            "(speculative.json): the engine then drafts that many by default.",
            metavar=FLAG,
        ),
    ] = False,
    repeat: Annotated[int, typer.Option(min=1, help="Timed runs per figure (median).")] = 3,
    threads: Annotated[
        int | None,
        typer.Option(min=1, help="torch intra-op threads (default: torch's, one per core)."),
    ] = None,
    device: Device = None,
    dtype: Dtype = None,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """The embedded engine beside baselines: MTP speculative decoding at each number of drafts
    vs plain decoding, with where a decode step's time goes (drafts, then the forward over
    them), whole-vocabulary drafts vs the model's reduced draft vocabulary,
    ours vs transformers' generate, batch scaling, prefill, peak memory."""
    import torch

    from opencomposer.bench.engine import BenchError, run_engine_bench, save_draft_tokens
    from opencomposer.bench.report import print_bench
    from opencomposer.serving.engines.embedded.loader import (
        DEFAULT_DRAFT_TOKENS,
        ModelLoadError,
        model_draft_tokens,
    )

    if threads is not None:
        torch.set_num_threads(threads)
    settings = settings_for(
        None,
        overrides_from(
            config,
            **{"engine.device": device, "engine.dtype": dtype, "engine.draft_tokens": draft_tokens},
        ),
    ).settings
    name, folder = _model_folder(settings, model or _bench_model(settings.models_dir))
    try:
        most = settings.engine.draft_tokens or max(
            DEFAULT_DRAFT_TOKENS, model_draft_tokens(folder) or 0
        )
    except ModelLoadError as exc:
        _fail(str(exc))
    title = f"benchmarking the embedded engine on {name}"
    with err.status(f"{title}: loading the model") as status:
        llm = _load(settings, name, folder)
        if save and not llm.num_mtp_layers:
            _fail(f"{name} has no MTP layer: no number of drafts to save")
        try:
            rows, info = run_engine_bench(
                llm,
                folder,
                prompts=prompts,
                max_tokens=max_tokens,
                draft_tokens=most,
                repeat=repeat,
                progress=lambda step: status.update(f"{title}: {step}"),
            )
        except BenchError as exc:
            _fail(str(exc))
    threads_used = f"{info['threads']} thread{'s' if info['threads'] > 1 else ''}"
    if save:
        saved = save_draft_tokens(folder, info)
        err.print(f"wrote {saved}", markup=False, soft_wrap=True)
    print_bench(
        rows,
        info,
        f"{name} ({info['family']}, {info['device']}, {info['dtype']}, "
        f"{threads_used}): {prompts} prompts of {info['prompt_tokens']:.0f} "
        f"tokens on average ({info['prompt_source']}), {max_tokens} output "
        f"tokens each, greedy; median of {repeat} runs",
        json,
    )
