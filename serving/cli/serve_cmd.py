"""`opencomposer serve`: the HTTP server, on loopback unless told otherwise."""

import socket
from typing import Annotated

import typer

from opencomposer.serving.cli.options import (
    ConfigOverrides,
    EngineSpec,
    Workspace,
    engine_overrides,
    overrides_from,
    settings_for,
)
from opencomposer.serving.cli.output import err, out
from opencomposer.serving.models import DEFAULT_CHAT_MODEL


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (sets server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (sets server.port).")] = None,
    engine: EngineSpec = None,
    workspace: Workspace = None,
    config: ConfigOverrides = None,
) -> None:
    """Serve the HTTP API. Binding a non-loopback address requires a bearer token; one is
    generated and printed once if the config has none."""
    # Imported here: the web stack is a third of the CLI's start-up and only `serve` needs it.
    import uvicorn

    from opencomposer.serving.http.app import ENDPOINTS, create_app
    from opencomposer.serving.http.auth import is_loopback, new_token

    loaded = settings_for(workspace, overrides_from(
        config, **engine_overrides(engine), **{"server.host": host, "server.port": port}))
    server = loaded.settings.server
    token = server.token.get_secret_value() if server.token else None
    if token is None and not is_loopback(server.host):
        token = new_token()
        err.print(
            f"[yellow]{server.host} is not a loopback address: clients must send "
            f"'Authorization: Bearer {token}' (set server.token to choose your own).[/]"
        )
    app = create_app(loaded, token, workspace)
    # Bind before announcing, so the printed URL carries the real port (also for port 0) and
    # an address in use is a clear error rather than a traceback from inside uvicorn.
    family = socket.AF_INET6 if ":" in server.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((server.host, server.port))
    except OSError as exc:
        sock.close()
        err.print(f"[red]cannot listen on {server.host}:{server.port}: {exc.strerror}[/]")
        raise typer.Exit(1) from None
    # Listening now lets clients that read the URL below connect at once: they wait in the
    # backlog while the server finishes starting (loading the runtime takes a moment).
    sock.listen(128)
    port = sock.getsockname()[1]
    shown_host = f"[{server.host}]" if ":" in server.host else server.host
    url = f"http://{shown_host}:{port}"
    out.print(f"opencomposer serving at [bold]{url}[/]")
    for path, what in ENDPOINTS.items():
        out.print(f"  {url}{path}  {what}")
    engine = loaded.settings.engine
    served = (f"{engine.backend} engine, model {engine.model or DEFAULT_CHAT_MODEL}"
              if engine.backend == "embedded" else f"{engine.backend} engine")
    out.print(f"Model: {served}. OpenAI clients: base_url={url}/v1")
    out.file.flush()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
