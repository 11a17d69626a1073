"""`opencomposer serve` as a real process, for tests that need the command itself: it is
started on a free port and read until its banner is complete, then stopped with Ctrl-C."""

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

CLI = str(Path(sys.executable).parent / "opencomposer")
# The first request waits in the listen backlog while the server loads its engine, which
# takes seconds on a busy machine: it may take this long, the others answer at once.
STARTUP_TIMEOUT = 120


@dataclass
class Served:
    url: str
    token: str | None
    page: str | None
    """The page URL printed (with its `?token=` when the server has one)."""

    models: str
    """What the banner says is served."""

    banner: str
    """Everything the server printed before it served."""

    proc: subprocess.Popen

    def get(self, path: str, token: str | None = None, **headers: str) -> httpx.Response:
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=STARTUP_TIMEOUT)


@contextmanager
def serving(*args: str, cwd: Path | None = None) -> Iterator[Served]:
    proc = subprocess.Popen(
        [CLI, "serve", "--port", "0", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        lines = [proc.stdout.readline()]
        match = re.search(r"serving at (http://\S+)", lines[0])
        assert match, lines[0] + proc.stderr.read()
        while not lines[-1].startswith("Models:"):
            lines.append(proc.stdout.readline())
            assert lines[-1], "".join(lines)
        text = "".join(lines)
        token = re.search(r"api_key=(\S+)", text)
        page = re.search(r"Web page: (\S+)", text)
        models = re.search(r"Models: (.+?)\. OpenAI clients", text)
        assert models, text
        yield Served(
            match.group(1),
            token and token.group(1),
            page and page.group(1),
            models.group(1),
            text,
            proc,
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
