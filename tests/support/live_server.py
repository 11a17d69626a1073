"""The app under a real uvicorn server on a loopback port, in a background thread.

Real HTTP clients (the `openai` SDK, httpx, Chromium) then see exactly what they would in
production: status lines, SSE framing, the Host and Origin checks, and a client that
disconnects mid-stream.
"""

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opencomposer.config import LoadedSettings, Settings
from opencomposer.serving.engines.base import Engine
from opencomposer.serving.http.app import create_app
from opencomposer.serving.http.threaded import serve_in_thread


@contextmanager
def live_server(
    engine: Engine,
    home: Path,
    *,
    token: str | None = None,
    timeout: float = 20,
    workspace_roots: list[Path] | None = None,
    max_body_bytes: int | None = None,
    engine_settings: dict[str, Any] | None = None,
    **server: Any,
) -> Iterator[str]:
    """Serve `engine` with a fresh OPENCOMPOSER home; yields the base URL (no `/v1`).
    Workspaces may be anywhere under the system's temporary folder unless told otherwise;
    `server` sets other `server.*` settings (`allowed_hosts`, `allowed_origins`). Without a
    token there is no bearer check (the Host and Origin checks stay). `engine_settings` are the
    `engine.*` settings the server believes `engine` was made from."""
    server_settings: dict[str, Any] = {
        "workspace_roots": workspace_roots or [Path(tempfile.gettempdir())],
        **server,
    }
    if max_body_bytes is not None:
        server_settings["max_body_bytes"] = max_body_bytes
    settings = Settings(
        home=home,
        models_dir=home / "models",
        server=server_settings,
        engine=engine_settings or {},
    )
    loaded = LoadedSettings(settings)
    app = create_app(loaded, token, engine=engine)
    with serve_in_thread(app, timeout=timeout) as url:
        yield url
