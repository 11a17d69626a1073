"""`opencomposer serve`: the HTTP server, on loopback unless told otherwise, with a bearer
token unless `server.auth = "none"` (honoured on loopback only)."""

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
from opencomposer.serving.model_store import DEFAULT_CHAT_MODEL


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (sets server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (sets server.port).")] = None,
    engine: EngineSpec = None,
    workspace: Workspace = None,
    config: ConfigOverrides = None,
) -> None:
    """Serve the HTTP API. Clients send the bearer token printed at start-up (`server.token`,
    or one made once and kept in the data folder), on loopback too."""
    # Imported here: the web stack is a third of the CLI's start-up and only `serve` needs it.
    import uvicorn

    from opencomposer.serving.http.agent_chat import AGENT_MODEL
    from opencomposer.serving.http.app import ENDPOINTS, create_app
    from opencomposer.serving.http.auth import TOKEN_FILE, TokenError, server_token
    from opencomposer.serving.http.connections import ACCEPT_BATCH, server_config
    from opencomposer.serving.http.origin import WILDCARDS, is_loopback

    loaded = settings_for(
        workspace,
        overrides_from(
            config, **engine_overrides(engine), **{"server.host": host, "server.port": port}
        ),
    )
    settings = loaded.settings
    server = settings.server
    if server.auth == "none" and not is_loopback(server.host):
        err.print(
            f'[red]server.auth = "none" is accepted only on a loopback address; '
            f"{server.host} is not one (clients elsewhere need the token).[/]"
        )
        raise typer.Exit(2)
    try:
        token = server_token(settings) if server.auth == "token" else None
    except (TokenError, OSError) as exc:
        err.print(f"[red]cannot set up the server token: {exc}[/]")
        raise typer.Exit(1) from None
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
    sock.listen(ACCEPT_BATCH)
    port = sock.getsockname()[1]
    # A wildcard bind is called by its loopback address here: the Host check refuses 0.0.0.0.
    shown = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(server.host, server.host)
    url = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}"
    out.print(f"opencomposer serving at [bold]{url}[/]")
    for path, what in ENDPOINTS.items():
        out.print(f"  {url}{path}  {what}")
    engine_settings = settings.engine
    model = (
        f"{engine_settings.model or DEFAULT_CHAT_MODEL} (embedded engine)"
        if engine_settings.backend == "embedded"
        else f"the {engine_settings.backend} engine's models"
    )
    # The agent is served as a model too: an OpenAI client that chats with it runs turns.
    served = f"{model} and {AGENT_MODEL} (the agent)"
    if token is None:
        out.print(f"Web page: {url}/", soft_wrap=True)
        out.print(f"Models: {served}. OpenAI clients: base_url={url}/v1")
        err.print(
            '[yellow]server.auth = "none": any program on this machine can drive the '
            "agent as you.[/]"
        )
    else:  # soft_wrap: a line that carries the token is never broken, so it copies whole
        out.print(f"Web page: {url}/?token={token}", soft_wrap=True)
        out.print(
            f"Models: {served}. OpenAI clients: base_url={url}/v1, api_key={token}", soft_wrap=True
        )
        kept = "your server.token" if server.token else f"kept in {settings.home / TOKEN_FILE}"
        out.print(f"Other clients send 'Authorization: Bearer <token>' ({kept}).")
    if server.host in WILDCARDS:
        out.print(
            f"Listening on every interface: clients elsewhere must name this machine by "
            f"a name or address in server.allowed_hosts (now: "
            f"{', '.join(server.allowed_hosts) or 'none'})."
        )
    out.file.flush()
    uvicorn.Server(server_config(app, server)).run(sockets=[sock])
