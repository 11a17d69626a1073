"""The agent for editors with no opencomposer code: `workspace/executeCommand` commands and the
code actions that invoke them, and the completion telemetry commands.

`opencomposer.ask`, `.fix`, `.explain` and `.tests` start a turn in the editor's thread for the
workspace folder of the document (one per folder and connection, created on first use), with
the selection and diagnostics as file references. The command answers at once with the thread
and turn; the turn reports through work-done progress, asks approvals with message requests,
and its final answer arrives as a message.
"""

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import converters
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import TextDocument

from opencomposer.agent.protocol.items import UserInput
from opencomposer.agent.protocol.methods import TurnStartParams
from opencomposer.agent.session import SessionError, ThreadSession
from opencomposer.lsp.completion import ACCEPTED_COMMAND
from opencomposer.lsp.requests import Action, action_request, question_request
from opencomposer.lsp.wire import plain_json, session_error

if TYPE_CHECKING:
    from opencomposer.lsp.server import OpenComposerServer

ASK = "opencomposer.ask"
FIX = "opencomposer.fix"
EXPLAIN = "opencomposer.explain"
TESTS = "opencomposer.tests"
STOP = "opencomposer.stop"
COMPLETION_SHOWN = "opencomposer.completion.shown"
COMPLETION_ACCEPTED = ACCEPTED_COMMAND
COMPLETION_PARTIALLY_ACCEPTED = "opencomposer.completion.partiallyAccepted"
COMPLETION_REJECTED = "opencomposer.completion.rejected"

_ACTIONS: dict[str, Action] = {FIX: "fix", EXPLAIN: "explain", TESTS: "tests"}
_TITLES: dict[Action, str] = {
    "explain": "Explain this with opencomposer",
    "tests": "Write tests for this with opencomposer",
}
_TYPES = converters.get_converter()


class EditorCommands:
    NAMES = frozenset(
        {
            ASK,
            FIX,
            EXPLAIN,
            TESTS,
            STOP,
            COMPLETION_SHOWN,
            COMPLETION_ACCEPTED,
            COMPLETION_PARTIALLY_ACCEPTED,
            COMPLETION_REJECTED,
        }
    )

    def __init__(self, server: "OpenComposerServer") -> None:
        self.server = server
        self._threads: dict[Path, str] = {}

    def handlers(self) -> dict[str, Callable[..., Awaitable[Any]]]:
        handlers: dict[str, Callable[..., Awaitable[Any]]] = {
            ASK: self.ask,
            STOP: self.stop,
            COMPLETION_SHOWN: self._telemetry("shown"),
            COMPLETION_ACCEPTED: self._telemetry("accepted"),
            COMPLETION_PARTIALLY_ACCEPTED: self._telemetry("partially_accepted"),
            COMPLETION_REJECTED: self._telemetry("rejected"),
        }
        for command, action in _ACTIONS.items():
            handlers[command] = self._action(action)
        return handlers

    # ------------------------------------------------------------------ code actions

    def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        """A fix for each diagnostic in the range, and explain / write tests for a selection."""
        uri, selection = params.text_document.uri, params.range
        actions = []
        for diagnostic in params.context.diagnostics:
            argument = {
                "uri": uri,
                "range": _TYPES.unstructure(diagnostic.range),
                "diagnostics": [_TYPES.unstructure(diagnostic)],
            }
            actions.append(
                lsp.CodeAction(
                    title=f"Fix with opencomposer: {_shorten(diagnostic.message)}",
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    command=lsp.Command(
                        title="Fix with opencomposer", command=FIX, arguments=[argument]
                    ),
                )
            )
        if selection.start != selection.end:
            argument = {"uri": uri, "range": _TYPES.unstructure(selection)}
            offered: tuple[tuple[str, Action], ...] = ((EXPLAIN, "explain"), (TESTS, "tests"))
            for command, action in offered:
                actions.append(
                    lsp.CodeAction(
                        title=_TITLES[action],
                        kind=lsp.CodeActionKind.Refactor,
                        command=lsp.Command(
                            title=_TITLES[action], command=command, arguments=[argument]
                        ),
                    )
                )
        return actions

    # ------------------------------------------------------------------ commands

    async def ask(self, *arguments: Any) -> dict[str, str]:
        """`opencomposer.ask` with a question, or `{"text", "uri"?, "range"?, "thread_id"?}`."""
        raw = plain_json(arguments[0]) if arguments else None
        if isinstance(raw, str):
            raw = {"text": raw}
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("text"), str)
            or not raw["text"].strip()
        ):
            raise JsonRpcInvalidParams(
                f"{ASK} takes a question: a string, or an object with "
                "`text` and optionally `uri` and `range`"
            )
        document = self._document(raw["uri"]) if isinstance(raw.get("uri"), str) else None
        selection = _structure(raw.get("range"), lsp.Range) if raw.get("range") else None
        thread_id = _thread_id(raw)
        root = await self._root(document, thread_id)
        return await self._start(
            root, question_request(raw["text"], document, root, selection), thread_id
        )

    def _action(self, action: Action) -> Callable[..., Awaitable[dict[str, str]]]:
        async def run(*arguments: Any) -> dict[str, str]:
            raw = plain_json(arguments[0]) if arguments else None
            if not isinstance(raw, dict) or not isinstance(raw.get("uri"), str):
                raise JsonRpcInvalidParams(
                    "the command takes `{uri, range, diagnostics?, thread_id?}`"
                )
            document = self._document(raw["uri"])
            selection = _structure(raw.get("range"), lsp.Range)
            diagnostics = [_structure(d, lsp.Diagnostic) for d in raw.get("diagnostics") or []]
            thread_id = _thread_id(raw)
            root = await self._root(document, thread_id)
            return await self._start(
                root, action_request(action, document, root, selection, diagnostics), thread_id
            )

        return run

    async def stop(self, *arguments: Any) -> dict[str, list[str]]:
        """Interrupt the turns running in this editor's threads."""
        stopped = []
        for thread_id in self._threads.values():
            session = await self._session(thread_id)
            if session.running is not None:
                stopped.append((await session.interrupt()).id)
        return {"interrupted": stopped}

    def _telemetry(self, kind: str) -> Callable[..., Awaitable[None]]:
        async def record(*arguments: Any) -> None:
            completer = self.server.completer
            values = plain_json(list(arguments))
            if completer is None or not values or not isinstance(values[0], str):
                raise JsonRpcInvalidParams("completion telemetry takes the completion id")
            if kind == "partially_accepted":
                length = values[1] if len(values) > 1 and isinstance(values[1], int) else 0
                completer.partially_accepted(values[0], length)
            else:
                getattr(completer, kind)(values[0])

        return record

    # ------------------------------------------------------------------ threads

    def root_of(self, document: TextDocument | None) -> Path:
        """The workspace folder holding the document (the innermost), else the first one."""
        folders = self.server.folders()
        if document is not None:
            path = Path(document.path).resolve()
            inside = [f for f in folders if path.is_relative_to(f)]
            if inside:
                return max(inside, key=lambda f: len(f.parts))
        if not folders:
            raise JsonRpcInvalidParams(
                "open a folder first: opencomposer works in the editor's workspace folders"
            )
        return folders[0]

    async def _root(self, document: TextDocument | None, thread_id: str | None) -> Path:
        """The folder file references are relative to: the named thread's workspace, else
        the document's folder."""
        if thread_id is None:
            return self.root_of(document)
        try:
            return Path((await self._session(thread_id)).thread.workspace)
        except SessionError as exc:
            raise session_error(exc) from None

    async def _start(
        self, root: Path, request: list[UserInput], thread_id: str | None = None
    ) -> dict[str, str]:
        """A turn in `thread_id` (a chat the client shows), else in the editor's thread for
        `root`."""
        runtime, api = self.server.runtime, self.server.api
        assert runtime is not None and api is not None  # served only after initialize
        try:
            if thread_id is None:
                known = self._threads.get(root)
                session = await self._session(known) if known else await runtime.start_thread(root)
                self._threads[root] = thread_id = session.thread.id
            params = TurnStartParams(thread_id=thread_id, input=request)
            session, turn = await api.watch_turn(params, self.server.link.follow)
        except SessionError as exc:
            raise session_error(exc) from None
        if not self.server.speaks_protocol:  # a protocol client shows the answer itself
            self.server.feedback.announce.add(turn.id)
        return {"thread_id": session.thread.id, "turn_id": turn.id}

    async def _session(self, thread_id: str) -> ThreadSession:
        assert self.server.runtime is not None
        return await self.server.runtime.open_thread(thread_id)

    def _document(self, uri: str) -> TextDocument:
        document = self.server.workspace.get_text_document(uri)
        if not uri.startswith("file:"):
            raise JsonRpcInvalidParams(f"{uri} is not a file")
        return document


def _thread_id(raw: dict[str, Any]) -> str | None:
    thread_id = raw.get("thread_id")
    if thread_id is not None and not isinstance(thread_id, str):
        raise JsonRpcInvalidParams("thread_id must be a string")
    return thread_id


def _structure(value: Any, kind: type) -> Any:
    try:
        return _TYPES.structure(value, kind)
    except Exception as exc:  # cattrs raises several kinds; all mean malformed arguments
        raise JsonRpcInvalidParams(f"not a valid {kind.__name__}: {value!r}") from exc


def _shorten(text: str, limit: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
