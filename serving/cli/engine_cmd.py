"""`opencomposer engine generate`: one streamed generation from the configured engine."""

import asyncio
import json as jsonlib
import time
from contextlib import aclosing
from pathlib import Path
from typing import Annotated, Any

import typer

from opencomposer.config import Settings
from opencomposer.serving.cli.options import (
    ConfigOverrides,
    EngineSpec,
    Json,
    Workspace,
    engine_overrides,
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
from opencomposer.serving.engines.errors import EngineProtocolError

engine_app = typer.Typer(help="Talk to the model engine directly.", no_args_is_help=True)


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
    prompt: Annotated[str, typer.Argument(help="The user message.")],
    system: Annotated[str | None, typer.Option(help="A system message.")] = None,
    tools: Annotated[
        Path | None, typer.Option(help="JSON file of tools the model may call.", exists=True)
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1)] = 512,
    temperature: Annotated[float | None, typer.Option(min=0.0)] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    engine: EngineSpec = None,
    base_url: Annotated[str | None, typer.Option(
        help="An OpenAI-compatible server (same as --engine openai:URL).")] = None,
    model: Annotated[str | None, typer.Option(help="Sets engine.model.")] = None,
    spec: Annotated[str | None, typer.Option(
        help="Speculative decoding in the embedded engine: mtp, none or auto.")] = None,
    draft_tokens: Annotated[int | None, typer.Option(
        min=1, max=8, help="Tokens the MTP layer drafts per step.")] = None,
    workspace: Workspace = None,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """Stream one completion: text to stdout, reasoning and statistics to stderr."""
    if spec is not None and spec not in ("mtp", "none", "auto"):
        raise typer.BadParameter("use mtp, none or auto", param_hint="--spec")
    flags = {"engine.model": model, "engine.speculative": spec,
             "engine.draft_tokens": draft_tokens}
    flags.update(engine_overrides(engine if base_url is None else f"openai:{base_url}"))
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
        print_json({**_result_json(result), "stats": stats})
    else:
        err.print(
            f"[dim]{stats['completion_tokens']} tokens in {stats['seconds']:.2f}s "
            f"({stats['tokens_per_second']:.1f} tok/s, first token after "
            f"{stats['first_token_seconds']:.2f}s), finish: {result.finish_reason}[/]"
        )
        if result.spec is not None:
            rate = f", {result.spec.accept_rate:.0%} of drafts accepted" if (
                result.spec.accept_rate is not None) else ""
            err.print(f"[dim]MTP: {result.spec.accept_length:.2f} tokens per verify step over "
                      f"{result.spec.verify_steps} steps{rate}[/]")


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
        print(event.text, end="", flush=True)
    elif isinstance(event, ReasoningDelta):
        err.print(event.text, end="", style="dim italic")
    elif isinstance(event, ToolCallStarted):
        print(f"\n[call {event.name} {event.id}] ", end="", flush=True)
    elif isinstance(event, ToolCallArgumentsDelta):
        print(event.text, end="", flush=True)


def _result_json(result: GenerationResult) -> dict[str, Any]:
    return {
        "text": result.text,
        "reasoning": result.reasoning,
        "tool_calls": [call.model_dump() for call in result.tool_calls],
        "finish_reason": result.finish_reason,
        "model": result.model,
        "usage": None if result.usage is None else {
            "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "cached_tokens": result.usage.cached_tokens,
        },
        "spec": None if result.spec is None else {
            "verify_steps": result.spec.verify_steps,
            "accept_length": result.spec.accept_length,
            "accept_rate": result.spec.accept_rate,
        },
    }
