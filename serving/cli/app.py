"""The `opencomposer` command line.

Every command here works; commands of capabilities not built yet are not registered.
Configuration and engine errors end the program with a one-paragraph message and a
distinct exit status (2: configuration, 1: engine or other failure), never a traceback.
"""

import sys
from typing import Annotated

import typer

import opencomposer
from opencomposer.config import ConfigError
from opencomposer.serving.cli.bench_cmd import bench_app
from opencomposer.serving.cli.chat_cmd import chat
from opencomposer.serving.cli.config_cmd import config_app
from opencomposer.serving.cli.doctor_cmd import doctor
from opencomposer.serving.cli.engine_cmd import engine_app
from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.lsp_cmd import lsp
from opencomposer.serving.cli.models_cmd import models_app
from opencomposer.serving.cli.options import FLAG
from opencomposer.serving.cli.protocol_cmd import protocol_app
from opencomposer.serving.cli.serve_cmd import serve
from opencomposer.serving.cli.tools_cmd import tool, tools
from opencomposer.serving.cli.traces_cmd import traces_app
from opencomposer.serving.cli.train_cmd import train_app
from opencomposer.serving.engines.errors import EngineError

app = CommandApp(
    name="opencomposer",
    help="An open, self-hostable IDE coding-agent server.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="markdown",
)
app.command()(chat)
app.command()(doctor)
app.command()(lsp)
app.command()(serve)
app.command()(tools)
app.command()(tool)
app.add_typer(bench_app, name="bench")
app.add_typer(config_app, name="config")
app.add_typer(engine_app, name="engine")
app.add_typer(models_app, name="models")
app.add_typer(protocol_app, name="protocol")
app.add_typer(traces_app, name="traces")
app.add_typer(train_app, name="train")


def _version(show: bool) -> None:
    if show:
        print(f"opencomposer {opencomposer.__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version.", metavar=FLAG
        ),
    ] = False,
) -> None:
    """An open, self-hostable IDE coding-agent server."""


def main() -> None:
    try:
        app()
    # Plain writes, not rich: these lines are grepped by scripts and must never be re-wrapped.
    except ConfigError as exc:
        sys.stderr.write(f"opencomposer: configuration error: {exc}\n")
        sys.exit(2)
    except EngineError as exc:
        sys.stderr.write(f"opencomposer: engine error ({exc.kind}): {exc.message}\n")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
