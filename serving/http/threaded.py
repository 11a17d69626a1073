"""The app under a real uvicorn server on a free loopback port, in a background thread: what
the benchmarks and the tests talk to, so they see real HTTP (status lines, SSE framing, clients
that go away) rather than an in-process shortcut."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from opencomposer.serving.http.connections import server_config


@contextmanager
def serve_in_thread(app: FastAPI, *, timeout: float = 30) -> Iterator[str]:
    """Serve `app` (made by `create_app`) as `opencomposer serve` does, with its connection
    limits, until the block ends; yields its base URL (no `/v1`)."""
    server = uvicorn.Server(
        server_config(
            app,
            app.state.settings.settings.server,
            host="127.0.0.1",
            port=0,
            lifespan="on",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
