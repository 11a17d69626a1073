"""The server of `opencomposer bench http`, in a process of its own.

`python -m opencomposer.bench.http_server ROOT PORT_FILE` serves the app with an
instant engine (its home and workspaces under ROOT) on a free loopback port, and writes that
port to PORT_FILE once uvicorn has started. The bench starts it as a child so the server has its
own interpreter and GIL instead of taking turns with the bench's HTTP clients. It stops on
SIGTERM or SIGINT, and also when its stdin closes, so a bench that is killed outright leaves
no server behind.
"""

import sys
import threading
import time
from pathlib import Path

import uvicorn

from opencomposer.bench.http import ANSWER
from opencomposer.config import LoadedSettings, Settings
from opencomposer.serving.engines.replay import InstantEngine
from opencomposer.serving.http.app import create_app
from opencomposer.serving.http.connections import server_config


def report_then_watch(server: uvicorn.Server, port_file: Path) -> None:
    """Write the port once the server listens, then stop the server when stdin closes (the
    parent holds the other end of that pipe until it ends, however it ends)."""
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    partial = port_file.with_name(port_file.name + ".partial")
    partial.write_text(str(port))
    partial.replace(port_file)  # all at once: the parent never reads half a number
    sys.stdin.read()
    server.should_exit = True


def main(root: Path, port_file: Path) -> None:
    settings = Settings(home=root / "server", models_dir=root / "models")
    # Set afterwards: a `ServerSettings` passed to `Settings` would drop what
    # OPENCOMPOSER_SERVER__* variables set, where this key merges with them.
    settings.server.workspace_roots = [root]
    app = create_app(LoadedSettings(settings), None, engine=InstantEngine(ANSWER))
    # The server as `opencomposer serve` runs it (its connection guard included).
    server = uvicorn.Server(
        server_config(app, settings.server, host="127.0.0.1", port=0, lifespan="on")
    )
    threading.Thread(target=report_then_watch, args=(server, port_file), daemon=True).start()
    server.run()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
