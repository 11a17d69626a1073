"""`opencomposer doctor`: what works here and what each missing piece disables."""

import asyncio

import typer
from rich.table import Table

from opencomposer.serving.cli.options import ConfigOverrides, Json, Workspace, overrides_from
from opencomposer.serving.cli.output import STATUS_STYLE, out, print_json
from opencomposer.serving.doctor import run_doctor


def doctor(workspace: Workspace = None, config: ConfigOverrides = None, json: Json = False) -> None:
    """Check Python, torch/CUDA, the sandbox, ripgrep, Neovim, models, the engine and config.

    Exits 1 when something the program cannot work without is broken.
    """
    report = asyncio.run(run_doctor(workspace, overrides_from(config)))
    if json:
        print_json(report.to_json())
    else:
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2, 0, 0))
        for column in ("check", "status", "detail", "disabled while not ok"):
            table.add_column(column, overflow="fold")
        for check in report.checks:
            style = STATUS_STYLE[check.status]
            table.add_row(
                check.name, f"[{style}]{check.status}[/]", check.detail, check.disables or ""
            )
        out.print(table)
        verdict = (
            "[green]ready[/]" if report.healthy else "[red]not usable: fix the errors above[/]"
        )
        out.print(f"\nopencomposer {report.to_json()['version']}: {verdict}")
    raise typer.Exit(0 if report.healthy else 1)
