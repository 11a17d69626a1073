"""The editor's side of end-to-end language-server tests: a pytest-lsp client that declares a
recorded editor's capabilities and behaves like that editor. It keeps its own buffers
(versions, unsaved text, positions in the negotiated encoding), applies or refuses the
server's edits, answers approvals and message requests, and collects every event.
"""

import asyncio
import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attrs
from lsprotocol import types as lsp
from lsprotocol.converters import get_converter
from pytest_lsp import LanguageClient

SERVER = Path(__file__).resolve().parent / "scripted_lsp_server.py"

PROFILES = ("neovim", "visual_studio_code", "emacs")
"""The recorded clients: Neovim 0.11 (UTF-8 first, `changes`-style workspace edits), VS Code
1.65 (no position encodings: UTF-16, versioned document changes, no inline completion) and
Emacs 29 (UTF-32 first, versioned document changes, no `window/showDocument`)."""

PROJECT = {
    "src/app.py": 'def greet(name):\n    return "hello " + nme\n\n\nprint(greet("wörld 😀"))\n',
    "src/util.py": "def twice(x):\n    return x * 2\n",
}
"""The files of the `workspace` fixture: a module with a typo and wide characters on its last
line, and another."""

_LSP = get_converter()

WAIT_SECONDS = 30.0
"""Longest wait for a condition; a passing test waits for milliseconds."""


def as_json(value: Any) -> Any:
    """A value as the JSON it travels as: pygls gives custom methods' params and results as
    namedtuples, and lsprotocol objects with tuples for arrays."""
    if attrs.has(type(value)):
        return as_json(_LSP.unstructure(value))
    if hasattr(value, "_asdict"):
        return as_json(value._asdict())
    if isinstance(value, dict):
        return {key: as_json(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(inner) for inner in value]
    return value


async def until(condition: Callable[[], Any], what: str) -> Any:
    """Wait until `condition()` is truthy and return its value; fail after WAIT_SECONDS."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not (value := condition()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return value


def units(text: str, encoding: str) -> int:
    """Length of `text` in a position encoding's code units."""
    if encoding == lsp.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8"))
    if encoding == lsp.PositionEncodingKind.Utf16:
        return len(text.encode("utf-16-le")) // 2
    return len(text)


@dataclass
class Buffer:
    """An open document as the editor holds it."""

    path: Path
    text: str
    encoding: str
    version: int = 1

    @property
    def uri(self) -> str:
        return self.path.as_uri()

    def position(self, offset: int) -> lsp.Position:
        """The LSP position of a character offset, in the negotiated encoding."""
        before = self.text[:offset]
        line_start = before.rfind("\n") + 1
        return lsp.Position(
            line=before.count("\n"), character=units(before[line_start:], self.encoding)
        )

    def offset(self, position: lsp.Position) -> int:
        """The character offset of an LSP position in the negotiated encoding."""
        lines = self.text.splitlines(keepends=True)
        start = sum(len(line) for line in lines[: position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        column = 0
        while column < len(line) and units(line[:column], self.encoding) < position.character:
            column += 1
        return start + column

    def replace(self, start: int, end: int, new_text: str) -> lsp.TextDocumentContentChangeEvent:
        """Change the text; the incremental change event that describes it."""
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(start=self.position(start), end=self.position(end)), text=new_text
        )
        self.text = self.text[:start] + new_text + self.text[end:]
        return change


@dataclass
class Editor:
    """A pytest-lsp client playing an editor with one workspace folder."""

    client: LanguageClient
    workspace: Path
    script: Path
    """The scripted model's replies (see `script_replies`)."""
    encoding: str = lsp.PositionEncodingKind.Utf16
    """The position encoding the server chose at `initialize`."""
    initialize_result: lsp.InitializeResult | None = None
    buffers: dict[str, Buffer] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    """What went wrong on the client's side: a handler that failed, a message it could not
    read (pygls would only log them, or answer the server with an error)."""

    accept_edits: bool = True
    """Whether `workspace/applyEdit` is applied (or refused)."""
    change_before_answer: bool = True
    """Send the `didChange` of an applied edit before answering it (as VS Code does), or
    after (as Neovim does, debounced): the server must see its edit either way."""
    edits: list[lsp.ApplyWorkspaceEditParams] = field(default_factory=list)

    approval: dict[str, Any] | None = field(default_factory=lambda: {"decision": "approve"})
    """The answer to every `opencomposer/approval/request` request (None: never answer)."""
    approvals: list[dict[str, Any]] = field(default_factory=list)
    withdrawn: list[dict[str, Any]] = field(default_factory=list)
    """Approval requests the server cancelled before they were answered."""

    message_choice: str = "Approve"
    """The button picked for every `window/showMessageRequest`."""
    message_requests: list[lsp.ShowMessageRequestParams] = field(default_factory=list)

    # ------------------------------------------------------------------ documents

    def script_replies(self, *replies: dict[str, Any]) -> None:
        """What the model answers, each reply `{"text", "reasoning", "calls": [[tool, args]],
        "delay", "hang_after"}`. The server reads them when it has used up the previous ones
        (the first time, at the first model call)."""
        self.script.write_text(json.dumps(list(replies)))

    def open(self, relative: str, language: str = "python") -> Buffer:
        path = (self.workspace / relative).resolve()
        buffer = Buffer(path, path.read_text(), self.encoding)
        self.buffers[buffer.uri] = buffer
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=buffer.uri, language_id=language, version=buffer.version, text=buffer.text
                )
            )
        )
        return buffer

    def type(self, buffer: Buffer, old: str, new: str) -> None:
        """The user replaces `old` (unique in the buffer) with `new`, without saving."""
        start = buffer.text.index(old)
        self._changed(buffer, [buffer.replace(start, start + len(old), new)])

    def save(self, buffer: Buffer) -> None:
        """The user saves: the buffer goes to disk."""
        buffer.path.write_text(buffer.text)
        self.client.text_document_did_save(
            lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=buffer.uri))
        )

    def _changed(self, buffer: Buffer, changes: list[lsp.TextDocumentContentChangeEvent]) -> None:
        buffer.version += 1
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(
                    uri=buffer.uri, version=buffer.version
                ),
                content_changes=changes,
            )
        )

    def apply_edit(self, params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        """`workspace/applyEdit`: apply to the buffers and report the change with `didChange`
        (before or after the answer, see `change_before_answer`)."""
        self.edits.append(params)
        if not self.accept_edits:
            return lsp.ApplyWorkspaceEditResult(
                applied=False, failure_reason="the buffer is read-only"
            )
        for uri, edits in text_edits(params.edit):
            buffer = self.buffers[uri]
            # Edits are relative to the text before any of them: apply from the bottom up,
            # which also makes the didChange events valid in sequence.
            ordered = sorted(
                edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
            )
            changes = [
                buffer.replace(buffer.offset(e.range.start), buffer.offset(e.range.end), e.new_text)
                for e in ordered
            ]
            if self.change_before_answer:
                self._changed(buffer, changes)
            else:  # the answer goes out when this returns; the change right after it
                asyncio.get_running_loop().call_soon(self._changed, buffer, changes)
        return lsp.ApplyWorkspaceEditResult(applied=True)

    async def answer_approval(self, params: Any) -> dict[str, Any]:
        """`opencomposer/approval/request`: `approval`, or (None) no answer until the server
        withdraws the question, which `withdrawn` records."""
        self.approvals.append(as_json(params))
        if self.approval is not None:
            return self.approval
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.withdrawn.append(as_json(params))
            raise
        raise AssertionError("unreachable: the wait ends only by cancellation")

    def answer_message_request(self, params: lsp.ShowMessageRequestParams) -> lsp.MessageActionItem:
        """`window/showMessageRequest`: the button `message_choice`."""
        self.message_requests.append(params)
        return lsp.MessageActionItem(title=self.message_choice)

    def record_event(self, params: Any) -> None:
        """`opencomposer/event`."""
        self.events.append(as_json(params))

    def serve(self) -> None:
        """Register the editor's handlers of the server's requests and notifications, and
        record the client's errors (before it starts: its reader takes the handler then)."""
        handlers: dict[str, Callable[[Any], Any]] = {
            "opencomposer/event": self.record_event,
            "opencomposer/approval/request": self.answer_approval,
            lsp.WORKSPACE_APPLY_EDIT: self.apply_edit,
            lsp.WINDOW_SHOW_MESSAGE_REQUEST: self.answer_message_request,
        }
        for method, handler in handlers.items():
            # pygls marks its handlers with attributes, which a bound method cannot take.
            self.client.feature(method)(_plain_handler(handler))
        report = self.client.report_server_error

        def record(error: Exception, source: Any) -> None:
            self.errors.append(error)
            report(error, source)

        self.client.report_server_error = record  # type: ignore[method-assign]
        converter = self.client.protocol._converter
        converter.register_structure_hook(
            lsp.Command | lsp.CodeAction, functools.partial(_command_or_code_action, converter)
        )

    # ------------------------------------------------------------------ the agent protocol

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """An `opencomposer/*` request; its result as plain JSON."""
        result = await self.client.protocol.send_request_async(f"opencomposer/{method}", params)
        return as_json(result)

    async def start_thread(self) -> str:
        result = await self.request("thread/start", {"workspace": str(self.workspace)})
        return result["thread"]["id"]

    async def start_turn(self, thread_id: str, text: str) -> str:
        result = await self.request(
            "turn/start", {"thread_id": thread_id, "input": [{"type": "text", "text": text}]}
        )
        return result["turn"]["id"]

    async def turn_completed(self, turn_id: str) -> dict[str, Any]:
        """Wait for the turn's `turn.completed` event; the turn it carries."""
        event = await until(
            lambda: next(
                (
                    e
                    for e in self.events
                    if e["type"] == "turn.completed" and e["turn"]["id"] == turn_id
                ),
                None,
            ),
            f"turn {turn_id} to complete",
        )
        return event["turn"]

    def items(self, kind: str, *, event: str = "item.completed") -> list[dict[str, Any]]:
        """Items of a type, as carried by their `item.completed` (or other) events."""
        return [e["item"] for e in self.events if e["type"] == event and e["item"]["type"] == kind]


def _plain_handler(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """pygls marks its handlers with attributes, which a bound method cannot take; and it
    awaits a handler only if the function itself is a coroutine function."""
    if inspect.iscoroutinefunction(handler):

        async def run_async(params: Any) -> Any:
            return await handler(params)

        return run_async
    return lambda params: handler(params)


def _command_or_code_action(
    converter: Any, value: dict[str, Any], _: Any
) -> lsp.Command | lsp.CodeAction:
    """lsprotocol (2025.0.0) reads any code action with a `command` as a Command, turning the
    CodeAction's command object into a string: a Command's `command` is the string."""
    kind = lsp.Command if isinstance(value.get("command"), str) else lsp.CodeAction
    return converter.structure(value, kind)


def text_edits(edit: lsp.WorkspaceEdit) -> list[tuple[str, list[lsp.TextEdit]]]:
    """(uri, edits) of a workspace edit in either of its shapes."""
    if edit.document_changes is not None:
        return [
            (change.text_document.uri, list(change.edits))
            for change in edit.document_changes
            if isinstance(change, lsp.TextDocumentEdit)
        ]
    return [(uri, list(edits)) for uri, edits in (edit.changes or {}).items()]
