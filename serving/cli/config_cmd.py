"""`opencomposer config show`: the merged settings and where each value came from."""

from rich.table import Table

from opencomposer import paths
from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.options import (
    ConfigOverrides,
    Json,
    Workspace,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import out, print_json

config_app = CommandApp(help="Inspect configuration.", no_args_is_help=True)


@config_app.command("show")
def show(workspace: Workspace = None, config: ConfigOverrides = None, json: Json = False) -> None:
    """Print every setting, its value and its source (default, file, env or command line)."""
    loaded = settings_for(workspace, overrides_from(config))
    rows = loaded.explain()
    if json:
        print_json(
            {
                "settings": {key: value for key, value, _ in rows},
                "sources": {key: origin for key, _, origin in rows},
                "files": [str(p) for p in loaded.files],
            }
        )
        return
    table = Table(box=None, header_style="bold", padding=(0, 2, 0, 0))
    for column in ("key", "value", "source"):
        table.add_column(column, overflow="fold")
    for key, value, origin in rows:
        style = "dim" if origin == "default" else ""
        table.add_row(key, f"[{style}]{value}[/]" if style else str(value), origin)
    out.print(table)
    out.print(
        f"\nuser file: {paths.user_config_file()}"
        f"{'' if paths.user_config_file().is_file() else ' (absent)'}"
    )
    if workspace is not None:
        workspace_file = workspace / paths.WORKSPACE_CONFIG_NAME
        out.print(
            f"workspace file: {workspace_file}{'' if workspace_file.is_file() else ' (absent)'}"
        )
