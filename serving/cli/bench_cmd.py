"""`opencomposer bench ...`: performance figures, each printed beside a baseline."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from opencomposer.bench.report import print_bench
from opencomposer.serving.cli import eval_cmd, smith_cmd
from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.options import (
    FLAG,
    ConfigOverrides,
    Json,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err, out

bench_app = CommandApp(
    help="The evaluation bench (list, run, report, compare), and performance benchmarks: ours "
    "beside a baseline, as a ratio.",
    no_args_is_help=True,
)
bench_app.command("list")(eval_cmd.list_tasks)
bench_app.command("run")(eval_cmd.run)
bench_app.command("report")(eval_cmd.report)
bench_app.command("compare")(eval_cmd.compare)
bench_app.command("generate")(smith_cmd.generate)
bench_app.command("import")(smith_cmd.import_swebench)


@bench_app.command("tools")
def tools(
    tree: Annotated[
        Path | None,
        typer.Option(
            help="Source tree to search (default: the Python standard library plus packages).",
            exists=True,
            file_okay=False,
        ),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure (median).")] = 5,
    semantic_files: Annotated[
        int, typer.Option(min=1, help="Files embedded for the semantic figures.")
    ] = 40,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """grep vs raw ripgrep, the symbol index vs ctags, semantic indexing and queries."""
    from opencomposer.bench.tools import run_tool_bench  # the tools load only here

    settings = settings_for(None, overrides_from(config)).settings
    with err.status("benchmarking the tools (a minute or two)"):
        rows, info = asyncio.run(
            run_tool_bench(tree, settings.models_dir, repeat=repeat, semantic_files=semantic_files)
        )
    sources = info["sources"]  # {name: folder}; `run_tool_bench` types its info as objects
    names = ", ".join(sources) if isinstance(sources, dict) else str(sources)
    print_bench(
        rows, info, f"tree: {info['files']:,} files, {info['lines']:,} lines ({names})", json
    )


@bench_app.command("agent")
def agent(
    steps: Annotated[
        int,
        typer.Option(
            min=1, help="Tool-calling model steps per turn (a final answer step follows)."
        ),
    ] = 50,
    calls: Annotated[
        int, typer.Option(min=2, help="Tool calls in the one step that prices a call.")
    ] = 100,
    items: Annotated[int, typer.Option(min=1, help="Items appended to the trace store.")] = 2000,
    thread_items: Annotated[
        int, typer.Option(min=1, help="Items in the thread whose prompt is rebuilt.")
    ] = 200,
    rollouts: Annotated[
        int, typer.Option(min=1, help="Scripted threads run at once in one process.")
    ] = 32,
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure (median).")] = 3,
    json: Json = False,
) -> None:
    """The runtime's own overhead: per model step and per tool call against an instant replay
    engine, trace-store writes, prompt rebuilds, the step's cost as the thread grows to 1,000
    items, and concurrent rollouts. Runs in a scratch home on defaults."""
    from opencomposer.bench.agent import run_agent_bench  # the runtime loads only here

    with err.status("benchmarking the agent runtime"):
        rows, info = asyncio.run(
            run_agent_bench(
                steps=steps,
                calls=calls,
                items=items,
                thread_items=thread_items,
                rollouts=rollouts,
                repeat=repeat,
            )
        )
    print_bench(
        rows,
        info,
        f"{steps + 1}-step turns against an instant replay engine, "
        f"{items:,} trace items, a {thread_items}-item thread, {rollouts} rollouts at once; "
        f"median of {repeat} runs",
        json,
    )


@bench_app.command("http")
def http(
    concurrency: Annotated[
        list[int] | None,
        typer.Option(
            min=1, help="Concurrent clients; repeat for several levels (default: 1, 16, 100)."
        ),
    ] = None,
    requests: Annotated[
        int, typer.Option(min=1, help="Chat completions per level (at least one per client).")
    ] = 1000,
    turns: Annotated[
        int, typer.Option(min=1, help="Agent turns per level (at least one per client).")
    ] = 200,
    readme_turn: Annotated[
        bool,
        typer.Option(
            help="Also time the README's turn with the default model (about a minute on a CPU; "
            "pulls the model when it is missing).",
            metavar=FLAG,
        ),
    ] = True,
    json: Json = False,
) -> None:
    """The HTTP layer's cost: chat completions (req/s, p50/p99 latency) and the time to a
    turn's first SSE event, against an instant engine served from a process of its own, beside
    the same engine in-process; what constrained decoding costs a token (tiny-moe); and the
    README's turn with the default model, against its one-minute goal."""
    from opencomposer.bench.http import run_http_bench  # the server loads only here
    from opencomposer.bench.readme_turn import time_readme_turn

    with err.status("benchmarking the HTTP server"):
        rows, info = asyncio.run(
            run_http_bench(concurrency=concurrency, requests=requests, turns=turns)
        )
    if readme_turn:
        with err.status("timing the README's turn with the default model"):
            rows.append(asyncio.run(time_readme_turn()))
    levels = ", ".join(str(level) for level in info["concurrency"])
    print_bench(
        rows,
        info,
        f"a loopback uvicorn server in its own process and an instant "
        f"replay engine; {levels} concurrent clients; {requests:,} chat "
        f"completions and {turns:,} agent turns per level",
        json,
    )


@bench_app.command("lsp")
def lsp(
    completions: Annotated[
        int, typer.Option(min=1, help="Inline completion requests per server.")
    ] = 300,
    turns: Annotated[int, typer.Option(min=1, help="Agent turns (and bare notifications).")] = 100,
    json: Json = False,
) -> None:
    """The language server's own cost: an inline completion's request-to-response time and a
    turn's time to its first event, against an instant engine, beside a bare pygls server that
    answers at once (both over stdio, each in a process of its own)."""
    from opencomposer.bench.lsp import run_lsp_bench  # pygls loads only here

    with err.status("benchmarking the language server"):
        rows, info = asyncio.run(run_lsp_bench(completions_count=completions, turns=turns))
    print_bench(
        rows,
        info,
        f"two stdio servers in their own processes, one client; "
        f"{completions:,} inline completions and {turns:,} agent turns",
        json,
    )


@bench_app.command("security")
def security(
    runs: Annotated[int, typer.Option(min=1, help="run_terminal calls per command and side.")] = 50,
    bomb: Annotated[
        bool,
        typer.Option(
            help="Also time how long a fork bomb lives at the process limit (only where a cgroup "
            "enforces it).",
            metavar=FLAG,
        ),
    ] = True,
    config: ConfigOverrides = None,
    json: Json = False,
) -> None:
    """The resource limits commands run under here (and how each is enforced), then what
    they add to each run_terminal call, beside the same sandbox without them; then what each
    guard of the sandbox (keyrings, /run, private files, the system view, an isolated network)
    and of the bench's grading costs, beside the same run without it."""
    from opencomposer.bench.guards import run_guard_bench  # tools load here
    from opencomposer.bench.security import run_security_bench

    settings = settings_for(None, overrides_from(config)).settings
    with err.status("benchmarking the sandbox's resource limits"):
        rows, info = asyncio.run(run_security_bench(settings.tools.sandbox, runs=runs, bomb=bomb))
    with err.status("benchmarking the sandbox's and the grading's guards"):
        rows += asyncio.run(run_guard_bench(runs))
    if not json:
        table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
        for column in ("limit", "value", "enforced by", "detail"):
            table.add_column(column, overflow="fold")
        for limit in info["limits"]:
            table.add_row(
                limit["name"],
                limit["value"],
                limit["enforced_by"] or "NOT enforced",
                limit["detail"],
            )
        out.print(f"limits in force ({info['sandbox']} sandbox):")
        out.print(table)
        out.print()
    print_bench(
        rows,
        info,
        f"per run_terminal call, {runs} calls each, limits beside none "
        f"in the same {info['sandbox']} sandbox; then each guard beside none (medians)",
        json,
    )


@bench_app.command("kernels")
def kernels(
    repeat: Annotated[int, typer.Option(min=1, help="Runs per figure (median).")] = 5,
    training_steps: Annotated[
        int,
        typer.Option(min=0, help="Steps of the low-precision training run per recipe (0: skip)."),
    ] = 400,
    json: Json = False,
) -> None:
    """The kernels beside torch at tiny-moe's and DeepSeek-V3's (scaled-down) expert shapes:
    quantizers' bytes per second beside a copy, quantized GEMMs and the MoE experts beside a
    dense GEMM (the reference on CPU; the Triton kernels where a GPU is); then the same small
    model trained in bf16 and in each low-precision recipe, final losses side by side."""
    from opencomposer.bench.kernels import kernel_rows, training_rows  # torch loads here
    from opencomposer.bench.low_precision import TrainingConfig

    with err.status("timing the kernels"):
        rows, info = kernel_rows(repeat)
    if training_steps:
        config = TrainingConfig(steps=training_steps)
        with err.status(f"training the same small model per recipe ({training_steps} steps)"):
            rows += training_rows(config)
        info["training"] = {"steps": config.steps, "batch": config.batch, "seed": config.seed}
    devices = (
        ", ".join(str(d) for d in info["devices"]) if isinstance(info["devices"], list) else ""
    )
    print_bench(rows, info, f"kernels on {devices}, {info['threads']} threads", json)
