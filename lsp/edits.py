"""The agent's file changes, made through the editor.

A file open in the editor is changed with `workspace/applyEdit`, as the smallest set of whole-line
edits, so the buffer keeps its undo history, cursor and unsaved state and the user's formatter
and save hooks behave as for their own edits. The edit names the document version it was made
against, so an editor whose buffer moved on refuses it rather than garbling it. Files the editor
does not have open, creations, deletions and moves go to disk (atomically, as everywhere else);
so does an edit the editor refuses or lacks support for, and the user is told. Each changed file
can be revealed with `window/showDocument` without taking focus.
"""

import asyncio
import contextlib
import difflib
import logging
from collections.abc import Callable
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from opencomposer.agent.tools.beneath import Tree
from opencomposer.agent.tools.textfile import BinaryFile, decode, lines_with_endings
from opencomposer.agent.tools.workspace import DiskWriter
from opencomposer.config import LspSettings
from opencomposer.lsp.documents import OpenDocuments

log = logging.getLogger(__name__)

APPLY_TIMEOUT = 30.0
"""Seconds to wait for the editor to answer an edit before writing to disk instead."""


class EditorWriter:
    """A `Writer` (agent.tools.workspace) that goes through the editor where it can."""

    def __init__(
        self,
        server: LanguageServer,
        documents: OpenDocuments,
        settings: LspSettings,
        *,
        root: Path,
        client_shows_changes: Callable[[], bool],
    ) -> None:
        """`root`: the workspace, beneath which disk writes go (see agent.tools.beneath).
        `client_shows_changes`: the client renders the agent's changes itself (it speaks
        the protocol), so revealing each file is left to an explicit setting."""
        self.server = server
        self.documents = documents
        self.settings = settings
        self.client_shows_changes = client_shows_changes
        self.disk = DiskWriter(Tree(root.resolve()))

    async def write(self, path: Path, data: bytes) -> None:
        document = self.documents.document(path)
        version = document.version if document is not None else None
        refused = None
        if document is not None and self.settings.apply_edits:
            refused = await self._apply(document, path, data)
            if refused is None:
                await self._reveal(path)
                return
        await self.disk.write(path, data)
        if document is not None:
            self._expect_written(path, version, data)
        if refused is not None:
            self._tell(
                lsp.MessageType.Warning,
                f"opencomposer wrote {path.name} to disk: the editor did not take the "
                f"edit ({refused}). Reload the file to see it.",
            )
        await self._reveal(path)

    async def delete(self, path: Path) -> None:
        await self.disk.delete(path)

    async def move(self, source: Path, target: Path) -> None:
        await self.disk.move(source, target)
        await self._reveal(target)

    # ------------------------------------------------------------------ applyEdit

    async def _apply(self, document: TextDocument, path: Path, data: bytes) -> str | None:
        """Send the change as an edit of the open document; why it did not land, or None."""
        if not _can_apply(self.server):
            return "it does not support workspace/applyEdit"
        try:
            text = decode(data).text
        except BinaryFile:
            return "the new content is binary"
        current = self.documents[path]
        text = _newlines_like(current, text)
        if text == current:
            return None
        version = document.version
        edits = line_edits(document, current, text)
        identifier = lsp.OptionalVersionedTextDocumentIdentifier(uri=document.uri, version=version)
        if _supports_document_changes(self.server):
            edit = lsp.WorkspaceEdit(
                document_changes=[lsp.TextDocumentEdit(text_document=identifier, edits=list(edits))]
            )
        else:
            edit = lsp.WorkspaceEdit(changes={document.uri: list(edits)})
        params = lsp.ApplyWorkspaceEditParams(edit=edit, label=f"opencomposer: {path.name}")
        try:
            async with asyncio.timeout(APPLY_TIMEOUT):
                result = await self.server.workspace_apply_edit_async(params)
        except TimeoutError:
            return f"no answer in {APPLY_TIMEOUT:g} s"
        except Exception as exc:  # an error response of any kind: the edit did not land
            return f"it answered with an error: {exc}"
        if not result.applied:
            return result.failure_reason or "it refused"
        self.documents.expect(path, version, text)
        return None

    def _expect_written(self, path: Path, version: int | None, data: bytes) -> None:
        """An open file written to disk: its buffer does not hold the change. Until the editor
        changes the document past `version` (a reload, or the user's typing, which then wins)
        the agent reads what it wrote, not the stale buffer, so that its next edit does not
        undo this one."""
        with contextlib.suppress(BinaryFile):
            self.documents.expect(path, version, decode(data).text)

    # ------------------------------------------------------------------ telling the user

    async def _reveal(self, path: Path) -> None:
        reveal = self.settings.reveal_edits
        if reveal is None:
            reveal = not self.client_shows_changes()
        if not (reveal and _supports_show_document(self.server)):
            return
        params = lsp.ShowDocumentParams(uri=path.as_uri(), take_focus=False)
        try:
            async with asyncio.timeout(APPLY_TIMEOUT):
                await self.server.window_show_document_async(params)
        except Exception as exc:  # revealing is a courtesy; the change itself has landed
            log.debug("showDocument failed", extra={"path": str(path), "error": repr(exc)})

    def _tell(self, kind: lsp.MessageType, message: str) -> None:
        self.server.window_show_message(lsp.ShowMessageParams(type=kind, message=message))


def line_edits(document: TextDocument, old: str, new: str) -> list[lsp.TextEdit]:
    """The smallest whole-line replacements turning `old` into `new`, as LSP edits of the
    document (positions in its negotiated encoding)."""
    before, after = lines_with_endings(old), lines_with_endings(new)
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edits.append(
            lsp.TextEdit(
                range=lsp.Range(
                    start=_line_start(document, before, i1), end=_line_start(document, before, i2)
                ),
                new_text="".join(after[j1:j2]),
            )
        )
    return edits


def _line_start(document: TextDocument, lines: list[str], index: int) -> lsp.Position:
    """Where line `index` starts; past the last line, the end of the text (an editor need not
    accept a position on a line that does not exist)."""
    if index < len(lines) or not lines or lines[-1].endswith(("\n", "\r")):
        return lsp.Position(line=index, character=0)
    last = lines[-1]
    return lsp.Position(
        line=len(lines) - 1, character=document.position_codec.client_num_units(last)
    )


def _newlines_like(current: str, text: str) -> str:
    """`text` with the buffer's line endings: a buffer of a CRLF file may hold LF lines."""
    wants_crlf = "\r\n" in current
    has_crlf = "\r\n" in text
    if has_crlf and not wants_crlf:
        return text.replace("\r\n", "\n")
    if wants_crlf and not has_crlf:
        return text.replace("\n", "\r\n")
    return text


def _workspace_capabilities(server: LanguageServer) -> lsp.WorkspaceClientCapabilities | None:
    return server.client_capabilities.workspace


def _can_apply(server: LanguageServer) -> bool:
    workspace = _workspace_capabilities(server)
    return bool(workspace and workspace.apply_edit)


def _supports_document_changes(server: LanguageServer) -> bool:
    workspace = _workspace_capabilities(server)
    edit = workspace.workspace_edit if workspace else None
    return bool(edit and edit.document_changes)


def _supports_show_document(server: LanguageServer) -> bool:
    window = server.client_capabilities.window
    return bool(window and window.show_document and window.show_document.support)
