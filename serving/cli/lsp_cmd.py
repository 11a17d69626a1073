"""`opencomposer lsp`: the language server, over stdio (what editors spawn) or TCP.

Over stdio, stdout is the protocol: nothing else may be printed there (logs go to stderr and
the log folder). Over TCP the server listens on loopback only and serves the first connection
whose `initialize` carries the token in `initializationOptions.token` (other connections are
closed without disturbing the listener), so another local user cannot drive the agent as you;
the token is `server.token` from the config, or one generated and printed once. A stream that
breaks LSP's framing ends the process with status 1 (`opencomposer.lsp.framing`).
"""

import json
import secrets
import sys
from typing import Annotated

import typer

from opencomposer.serving.cli.options import (
    FLAG,
    Approval,
    ConfigOverrides,
    EngineSpec,
    Workspace,
    approval_overrides,
    engine_overrides,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err


def lsp(
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio",
            help="Speak LSP over stdin and stdout: the default, and what editors pass "
            "when they launch a server.",
            metavar=FLAG,
        ),
    ] = False,
    tcp: Annotated[
        int | None,
        typer.Option("--tcp", metavar="PORT", help="Listen on 127.0.0.1:PORT instead of stdio."),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Print the capabilities the server advertises, then exit.", metavar=FLAG
        ),
    ] = False,
    engine: EngineSpec = None,
    approval: Approval = None,
    workspace: Workspace = None,
    config: ConfigOverrides = None,
    node_ipc: Annotated[bool, typer.Option("--node-ipc", hidden=True, metavar=FLAG)] = False,
    socket: Annotated[str | None, typer.Option("--socket", hidden=True)] = None,
    pipe: Annotated[str | None, typer.Option("--pipe", hidden=True)] = None,
) -> None:
    """Serve the Language Server Protocol: the agent, inline completion and code actions."""
    # What LSP clients pass to say how they will talk (vscode-languageclient appends one per
    # `TransportKind`): the transports other than stdio are refused plainly instead of as an
    # unknown option, so the client's log says what to change.
    given = (("--node-ipc", node_ipc), ("--socket", socket), ("--pipe", pipe))
    other = next((flag for flag, value in given if value), None)
    if other is not None:
        err.print(
            f"opencomposer lsp speaks LSP over stdio (--stdio, the default) or TCP "
            f"(--tcp PORT), not {other}: configure the client's transport as stdio.",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    if stdio and tcp is not None:
        err.print("--stdio and --tcp are two transports: pass one of them.")
        raise typer.Exit(2)
    # Imported here: pygls is only needed by this command.
    from opencomposer.lsp.server import OpenComposerServer, advertised_capabilities
    from opencomposer.serving.engines import make_engine

    loaded = settings_for(
        workspace,
        overrides_from(config, **engine_overrides(engine), **approval_overrides(approval)),
    )
    settings = loaded.settings
    token = None
    if tcp is not None:
        configured = settings.server.token
        token = configured.get_secret_value() if configured else secrets.token_urlsafe(32)
        if configured is None:
            err.print(
                f"LSP over TCP: clients must send initializationOptions.token = {token!r} "
                "(set server.token to choose your own)."
            )
    server = OpenComposerServer(
        settings, lambda: make_engine(settings.engine, settings.models_dir), token=token
    )
    if check:
        json.dump(advertised_capabilities(server), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    if tcp is None:
        server.start_io()
    else:
        server.start_tcp("127.0.0.1", tcp)  # logs "listening on ..." once it does
