"""The app under a real uvicorn server on a loopback port, in a background thread.

Real HTTP clients (the `openai` SDK, httpx) then see exactly what they would in production:
status lines, SSE framing, and a client that disconnects mid-stream.
"""

import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from opencomposer.config import LoadedSettings, Settings
from opencomposer.serving.engines.base import Engine
from opencomposer.serving.http.app import create_app


@contextmanager
def live_server(engine: Engine, home: Path, *, token: str | None = None,
                timeout: float = 20, workspace_roots: list[Path] | None = None,
                max_body_bytes: int | None = None) -> Iterator[str]:
    """Serve `engine` with a fresh OPENCOMPOSER home; yields the base URL (no `/v1`).
    Workspaces may be anywhere under the system's temporary folder unless told otherwise."""
    server_settings = {"workspace_roots": workspace_roots or [Path(tempfile.gettempdir())]}
    if max_body_bytes is not None:
        server_settings["max_body_bytes"] = max_body_bytes
    loaded = LoadedSettings(Settings(home=home, models_dir=home / "models",
                                     server=server_settings))
    app = create_app(loaded, token, engine=engine)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                            lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
