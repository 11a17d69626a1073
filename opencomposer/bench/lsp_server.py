"""The servers `opencomposer bench lsp` measures, each over stdio in a process of its own.

`python -m opencomposer.bench.lsp_server ours HOME` is the opencomposer language server with an
instant engine and no debounce (its trace store under HOME): what is left of a completion or an
event is the server's own work. `... bare HOME` is the baseline: a pygls server whose inline
completion handler returns a fixed item and whose `bench/notify` request sends one notification,
so both sides pay the same JSON-RPC framing, pygls dispatch and pipes.
"""

import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from opencomposer.agent.protocol.common import ApprovalMode
from opencomposer.config import Settings
from opencomposer.lsp.server import OpenComposerServer
from opencomposer.serving.engines.replay import InstantEngine

COMPLETION = "return a + b"
NOTIFY_METHOD = "bench/notify"
EVENT_METHOD = "bench/event"


def ours(home: Path) -> LanguageServer:
    settings = Settings(home=home, models_dir=home / "models")
    # Key by key: a section model passed to `Settings` would drop what OPENCOMPOSER_*
    # variables set in that section, where these keys merge with them.
    settings.lsp.completion.debounce_ms = 0
    settings.agent.approval.writes_workspace = ApprovalMode.auto
    settings.agent.approval.dangerous = ApprovalMode.auto
    return OpenComposerServer(settings, lambda: InstantEngine(COMPLETION))


def bare() -> LanguageServer:
    server = LanguageServer("bench-bare", "1")

    @server.feature(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, lsp.InlineCompletionOptions())
    def inline_completion(params: lsp.InlineCompletionParams) -> lsp.InlineCompletionList:
        position = params.position
        return lsp.InlineCompletionList(
            items=[
                lsp.InlineCompletionItem(
                    insert_text=COMPLETION, range=lsp.Range(start=position, end=position)
                )
            ]
        )

    @server.feature(NOTIFY_METHOD)
    def notify(params: Any) -> dict[str, bool]:
        server.protocol.notify(EVENT_METHOD, {"type": "turn.started"})
        return {"sent": True}

    return server


if __name__ == "__main__":
    kind, home = sys.argv[1], Path(sys.argv[2])
    (ours(home) if kind == "ours" else bare()).start_io()
