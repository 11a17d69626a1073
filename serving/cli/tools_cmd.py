"""`opencomposer tools` and `opencomposer tool NAME`: the tool harness from the shell."""

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from opencomposer.config import Settings
from opencomposer.serving.cli.options import (
    ConfigOverrides,
    Json,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.options import (
    Workspace as WorkspaceOption,
)
from opencomposer.serving.cli.output import out, print_json

if TYPE_CHECKING:  # the harness loads only when a tool runs
    from opencomposer.agent.tools.harness_protocol import CallOutcome


def tools(json: Json = False) -> None:
    """List the tools the model can call, with their JSON schemas."""
    from opencomposer.agent.tools.registry import default_tools

    specs = [tool.spec() for tool in default_tools()]
    if json:
        print_json([spec.to_openai() for spec in specs])
        return
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("tool", "arguments", "description"):
        table.add_column(column, overflow="fold")
    for spec in specs:
        required = set(spec.parameters.get("required", []))
        arguments = ", ".join(
            name if name in required else f"{name}?"
            for name in spec.parameters.get("properties", {})
        )
        table.add_row(spec.name, arguments, spec.description)
    out.print(table)


def tool(
    name: Annotated[str, typer.Argument(help="Tool name, as listed by `opencomposer tools`.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    workspace: WorkspaceOption = None,
    config: ConfigOverrides = None,
) -> None:
    """Run one tool call in a workspace and print its result as JSON.

    Exits 0 when the call succeeds and 2 when the tool reports an error (the typed error is in
    the JSON).
    """
    root = workspace or Path.cwd()
    loaded = settings_for(root, overrides_from(config))
    settings = loaded.settings
    outcome = asyncio.run(_call(root, settings, name, args))
    print_json(outcome.to_json())
    raise typer.Exit(0 if outcome.ok else 2)


async def _call(root: Path, settings: Settings, name: str, args: str) -> "CallOutcome":
    from opencomposer.agent.tools.harness import ToolHarness
    from opencomposer.agent.tools.workspace import Workspace

    harness = ToolHarness(
        Workspace(root),
        settings.tools,
        settings.home,
        thread_id="cli",
        models_dir=settings.models_dir,
    )
    try:
        return await harness.call(name, args)
    finally:
        await harness.close()
