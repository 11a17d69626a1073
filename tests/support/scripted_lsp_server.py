"""`opencomposer lsp` with a scripted model, for end-to-end tests with real LSP clients
(pytest-lsp, Neovim). Run as `python tests/support/scripted_lsp_server.py SCRIPT [REQUESTS]`.

SCRIPT is a JSON file read when the model is first asked (so a test may write it after the
client started the server): a list of replies, each `{"text", "reasoning", "calls": [[tool,
arguments], ...], "delay", "hang_after"}`. Settings come from the environment as for the real
command (OPENCOMPOSER_HOME, OPENCOMPOSER_AGENT__APPROVAL__..., etc.). Each request the model
gets is appended to REQUESTS, when given, as a line of JSON (a `GenerationRequest`): what the
engine saw, for a test in another process to compare.
"""

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opencomposer.config import load_settings
from opencomposer.lsp.server import OpenComposerServer
from opencomposer.serving.engines.base import EngineEvent, GenerationRequest
from support.scripted_engine import Reply, ScriptedEngine


class FileScriptedEngine(ScriptedEngine):
    """A scripted engine whose replies are (re)read from a file when it runs out of them."""

    def __init__(self, script: Path, requests_log: Path | None = None) -> None:
        super().__init__([])
        self.script = script
        self.requests_log = requests_log

    async def generate(self, request: GenerationRequest) -> AsyncIterator[EngineEvent]:
        if self.requests_log is not None:
            with self.requests_log.open("a") as log:
                log.write(request.model_dump_json() + "\n")
        if self._next >= len(self.replies) and self.script.is_file():
            self.replies = [
                Reply(
                    text=r.get("text", ""),
                    reasoning=r.get("reasoning", ""),
                    calls=[tuple(c) for c in r.get("calls", [])],
                    delay=r.get("delay", 0.0),
                    hang_after=r.get("hang_after"),
                )
                for r in json.loads(self.script.read_text())
            ]
            self._next = 0
        async for event in super().generate(request):
            yield event


def main() -> None:
    settings = load_settings().settings
    requests_log = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    engine = FileScriptedEngine(Path(sys.argv[1]), requests_log)
    OpenComposerServer(settings, lambda: engine).start_io()


if __name__ == "__main__":
    main()
