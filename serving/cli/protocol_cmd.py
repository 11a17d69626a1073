"""`opencomposer protocol schema`: the agent protocol's JSON Schema for client authors."""

from pathlib import Path
from typing import Annotated

import typer

from opencomposer.agent.protocol.schema import protocol_schema_json
from opencomposer.serving.cli.help_style import CommandApp
from opencomposer.serving.cli.output import err

protocol_app = CommandApp(help="The agent protocol.", no_args_is_help=True)


@protocol_app.command("schema")
def schema(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Write the JSON Schema of every protocol method, item and event."""
    text = protocol_schema_json()
    if out is None:
        print(text, end="")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)  # atomic: a reader never sees half a schema
    err.print(f"wrote {out}")
