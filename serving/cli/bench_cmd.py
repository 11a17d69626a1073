"""`opencomposer bench ...`: performance figures, each printed beside a baseline."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from opencomposer.serving.cli.options import ConfigOverrides, Json, overrides_from, settings_for
from opencomposer.serving.cli.output import err, out, print_json

bench_app = typer.Typer(help="Benchmarks: ours beside a baseline, as a ratio.",
                        no_args_is_help=True)


def _seconds(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1000:.1f} ms" if unit == "s" and value < 1 else f"{value:.3g} {unit}"


@bench_app.command("tools")
def tools(
    tree: Annotated[Path | None, typer.Option(
        help="Source tree to search (default: the Python standard library plus packages).",
        exists=True, file_okay=False)] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure (median).")] = 5,
    semantic_files: Annotated[int, typer.Option(
        min=1, help="Files embedded for the semantic figures.")] = 40,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """grep vs raw ripgrep, the symbol index vs ctags, semantic indexing and queries."""
    from opencomposer.agent.tools.bench import run_tool_bench  # the tools load only here

    settings = settings_for(None, overrides_from(config)).settings
    with err.status("benchmarking the tools (a minute or two)"):
        rows, info = asyncio.run(run_tool_bench(tree, settings.models_dir, repeat=repeat,
                                                semantic_files=semantic_files))
    if json:
        print_json({**info, "rows": [{**row.__dict__, "ratio": row.ratio} for row in rows]})
        return
    out.print(f"tree: {info['files']:,} files, {info['lines']:,} lines "
              f"({', '.join(info['sources'])})")
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("measurement", "baseline", "", "ours", "ours / baseline", "note"):
        table.add_column(column, overflow="fold")
    for row in rows:
        ratio = f"{row.ratio:.3g}x" if row.ratio is not None else ""
        table.add_row(row.name, row.baseline_label, _seconds(row.baseline, row.unit),
                      _seconds(row.ours, row.unit), ratio, row.note)
    out.print(table)


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "s":
        ms = value * 1000
        return f"{ms:.2f} ms" if ms >= 1 else f"{ms:.3g} ms"
    return f"{value:,.0f} {unit}"


@bench_app.command("agent")
def agent(
    steps: Annotated[int, typer.Option(
        min=1, help="Tool-calling model steps per turn (a final answer step follows).")] = 50,
    calls: Annotated[int, typer.Option(
        min=2, help="Tool calls in the one step that prices a call.")] = 100,
    items: Annotated[int, typer.Option(
        min=1, help="Items appended to the trace store.")] = 2000,
    thread_items: Annotated[int, typer.Option(
        min=1, help="Items in the thread whose prompt is rebuilt.")] = 200,
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure (median).")] = 3,
    json: Json = False,
) -> None:
    """The runtime's own overhead: per model step and per tool call against an instant replay
    engine, trace-store writes, and prompt rebuilds. Runs in a scratch home on defaults."""
    from opencomposer.agent.bench import run_agent_bench  # the runtime loads only here

    with err.status("benchmarking the agent runtime"):
        rows, info = asyncio.run(run_agent_bench(
            steps=steps, calls=calls, items=items,
            thread_items=thread_items, repeat=repeat))
    if json:
        print_json({**info, "rows": [{**row.__dict__, "ratio": row.ratio} for row in rows]})
        return
    out.print(f"{steps + 1}-step turns against an instant replay engine, {items:,} trace items, "
              f"a {thread_items}-item thread; median of {repeat} runs")
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("measurement", "baseline", "", "ours", "ours / baseline", "note"):
        table.add_column(column, overflow="fold")
    for row in rows:
        ratio = f"{row.ratio:.3g}x" if row.ratio is not None else "-"
        table.add_row(row.name, row.baseline_label, _figure(row.baseline, row.unit),
                      _figure(row.ours, row.unit), ratio, row.note)
    out.print(table)
