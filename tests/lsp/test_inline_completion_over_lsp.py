"""Inline completion end to end: a pytest-lsp client against the real server process with a
scripted model (which writes every request it gets to a file, so the test sees the
fill-in-the-middle prompt the engine saw). The prompt is cut at the cursor after wide
characters in whichever position encoding the client negotiated; `$/cancelRequest` and a newer
request for the document cancel a pending one; `textDocument/completion` answers only clients
without inline completion; accepting an item is recorded in the trace store.
"""

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client
from support.lsp_editor import units

from opencomposer.agent.traces.base import TraceStore
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.lsp.completion import ACCEPTED_COMMAND
from opencomposer.serving.engines.base import GenerationRequest, TextPrompt

SERVER = Path(__file__).resolve().parents[1] / "support" / "scripted_lsp_server.py"
WAIT = 30.0
"""Longest wait for the server; a passing test waits for milliseconds."""

CARET = "‸"
"""Marks the cursor in a document's text."""


def accepted(result: lsp.InlineCompletionList | lsp.CompletionList) -> lsp.Command:
    """The acceptance command of the result's one item (its argument: the completion's id,
    a fresh uuid), as the client structures it (arrays as tuples)."""
    [item] = result.items
    assert item.command is not None and len(item.command.arguments[0]) == 32
    return lsp.Command(
        title="accepted", command=ACCEPTED_COMMAND, arguments=(item.command.arguments[0],)
    )


def with_inline_completion(encoding: str) -> lsp.ClientCapabilities:
    """VS Code's recorded capabilities (which predate inline completion and position
    encodings), declaring both."""
    capabilities = client_capabilities("visual_studio_code")
    assert capabilities.text_document is not None and capabilities.general is not None
    capabilities.text_document.inline_completion = lsp.InlineCompletionClientCapabilities()
    capabilities.general.position_encodings = [encoding]
    return capabilities


@dataclass
class Editor:
    """A client connected to a server, and where that server keeps what a test reads."""

    client: LanguageClient
    root: Path
    home: Path
    requests_log: Path
    encoding: str
    running: bool = True

    def open(self, relative: str, marked: str, language: str = "python") -> lsp.Position:
        """Open a document whose text marks the cursor with CARET; the cursor's position."""
        before, _, after = marked.partition(CARET)
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(before + after)
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(
                    uri=path.as_uri(), language_id=language, version=1, text=before + after
                )
            )
        )
        line = before[before.rfind("\n") + 1 :]
        return lsp.Position(line=before.count("\n"), character=units(line, self.encoding))

    def inline_params(self, relative: str, position: lsp.Position) -> lsp.InlineCompletionParams:
        return lsp.InlineCompletionParams(
            context=lsp.InlineCompletionContext(
                trigger_kind=lsp.InlineCompletionTriggerKind.Automatic
            ),
            text_document=lsp.TextDocumentIdentifier(uri=(self.root / relative).as_uri()),
            position=position,
        )

    async def inline(self, relative: str, position: lsp.Position) -> lsp.InlineCompletionList:
        return await asyncio.wait_for(
            self.client.text_document_inline_completion_async(
                self.inline_params(relative, position)
            ),
            WAIT,
        )

    def prompts(self) -> list[TextPrompt | None]:
        """The prompt of every request the model got, in order."""
        if not self.requests_log.exists():
            return []
        return [
            GenerationRequest.model_validate_json(line).prompt
            for line in self.requests_log.read_text().splitlines()
        ]

    async def until_asked(self, count: int) -> None:
        """Wait until the model got `count` requests."""
        deadline = asyncio.get_running_loop().time() + WAIT
        while len(self.prompts()) < count:
            assert asyncio.get_running_loop().time() < deadline, f"the model got no request {count}"
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        """Shut the server down (which closes its trace store) and wait for it to exit."""
        if self.running:
            self.running = False
            await asyncio.wait_for(self.client.shutdown_session(), WAIT)
            await self.client.stop()

    def store(self) -> TraceStore:
        return SQLiteTraceStore(self.home / "traces.db")


Start = Callable[..., Awaitable[Editor]]


@pytest.fixture
async def start_editor(tmp_path: Path) -> AsyncIterator[Start]:
    """`await start_editor(capabilities, *replies)`: a server whose model answers with the
    replies (`{"text", "delay", "hang_after"}`), and an initialized client declaring
    `capabilities`, with the project folder `tmp_path / "project"` open. No debounce."""
    editors: list[Editor] = []

    async def start(capabilities: lsp.ClientCapabilities, *replies: dict) -> Editor:
        root = tmp_path / "project"
        root.mkdir(exist_ok=True)
        script, requests_log = tmp_path / "script.json", tmp_path / "requests.jsonl"
        script.write_text(json.dumps(list(replies)))
        home = tmp_path / "data"
        client = make_test_lsp_client()
        await client.start_io(
            sys.executable,
            str(SERVER),
            str(script),
            str(requests_log),
            env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
        )
        result = await asyncio.wait_for(
            client.initialize_session(
                lsp.InitializeParams(
                    capabilities=capabilities,
                    root_uri=root.resolve().as_uri(),
                    initialization_options={"completion": {"debounce_ms": 0}},
                )
            ),
            WAIT,
        )
        editor = Editor(
            client,
            root.resolve(),
            home,
            requests_log,
            result.capabilities.position_encoding or lsp.PositionEncodingKind.Utf16,
        )
        editors.append(editor)
        return editor

    yield start
    for editor in editors:
        await editor.stop()


WIDE = f"first = 1\ns = '😀中文𝄞é' + {CARET}f(x)\nlast = 2\n"
"""Before the cursor on its line: an emoji and a clef outside the BMP (two UTF-16 units, four
UTF-8 bytes), CJK (one unit, three bytes) and an accent (one unit, two bytes)."""


@pytest.mark.parametrize(
    "encoding", [lsp.PositionEncodingKind.Utf16, lsp.PositionEncodingKind.Utf8]
)
async def test_the_prompt_is_cut_at_the_cursor_in_the_negotiated_encoding(start_editor, encoding):
    editor = await start_editor(with_inline_completion(encoding), {"text": "g(y) + "})
    assert editor.encoding == encoding
    position = editor.open("src/app.py", WIDE)
    assert (
        position.character
        == {lsp.PositionEncodingKind.Utf16: 16, lsp.PositionEncodingKind.Utf8: 25}[encoding]
    )

    result = await editor.inline("src/app.py", position)

    command = accepted(result)
    # The model's trailing space is trimmed; the rest of the line stays as it was.
    assert result == lsp.InlineCompletionList(
        items=(
            lsp.InlineCompletionItem(
                insert_text="g(y) +", range=lsp.Range(start=position, end=position), command=command
            ),
        )
    )
    assert editor.prompts() == [
        TextPrompt(prefix="first = 1\ns = '😀中文𝄞é' + ", suffix="f(x)\nlast = 2\n")
    ]
    await editor.stop()
    store = editor.store()
    [record] = store.completions()
    assert (record.id, record.path, record.text, record.language, record.model) == (
        command.arguments[0],
        "src/app.py",
        "g(y) +",
        "python",
        "scripted-model",
    )
    # Lengths in characters: what the model saw, whatever the client counts in.
    assert (record.prefix_length, record.suffix_length) == (24, 14)
    assert record.events == []
    store.close()


async def test_a_cancelled_request_answers_request_cancelled_and_the_next_one_works(start_editor):
    editor = await start_editor(
        with_inline_completion(lsp.PositionEncodingKind.Utf16),
        {"text": "never sent", "hang_after": 0},
        {"text": "b"},
    )
    position = editor.open("a.py", f"x = {CARET}\n")
    pending = editor.client.protocol.send_request(
        lsp.TEXT_DOCUMENT_INLINE_COMPLETION, editor.inline_params("a.py", position), msg_id="slow"
    )
    await editor.until_asked(1)

    editor.client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="slow"))

    with pytest.raises(JsonRpcRequestCancelled) as cancelled:
        await asyncio.wait_for(asyncio.wrap_future(pending), WAIT)
    assert cancelled.value.code == -32800
    result = await editor.inline("a.py", position)
    assert [item.insert_text for item in result.items] == ["b"]
    assert editor.prompts() == [TextPrompt(prefix="x = ", suffix="\n")] * 2


async def test_a_newer_request_for_the_document_cancels_the_pending_one(start_editor):
    editor = await start_editor(
        with_inline_completion(lsp.PositionEncodingKind.Utf16),
        {"text": "never sent", "hang_after": 0},
        {"text": "2"},
    )
    position = editor.open("a.py", f"x = {CARET}\n")
    first = asyncio.ensure_future(editor.inline("a.py", position))
    await editor.until_asked(1)

    second = await editor.inline("a.py", position)

    with pytest.raises(JsonRpcRequestCancelled):
        await first
    assert [item.insert_text for item in second.items] == ["2"]


async def test_completion_answers_a_client_without_inline_completion(start_editor):
    # Neovim 0.11: no inline completion, UTF-8 positions.
    editor = await start_editor(client_capabilities("neovim"), {"text": "中文 + 1\nmore"})
    assert editor.encoding == lsp.PositionEncodingKind.Utf8
    position = editor.open("a.py", f"s = '😀' + {CARET}\n")
    assert position.character == 13

    result = await asyncio.wait_for(
        editor.client.text_document_completion_async(
            lsp.CompletionParams(
                text_document=lsp.TextDocumentIdentifier(uri=(editor.root / "a.py").as_uri()),
                position=position,
            )
        ),
        WAIT,
    )

    # The rest of the line is empty: a block, cut by the scripted reply's own end.
    assert result == lsp.CompletionList(
        is_incomplete=True,
        items=(
            lsp.CompletionItem(
                label="中文 + 1",
                kind=lsp.CompletionItemKind.Text,
                text_edit=lsp.TextEdit(
                    range=lsp.Range(start=position, end=position), new_text="中文 + 1\nmore"
                ),
                insert_text_format=lsp.InsertTextFormat.PlainText,
                command=accepted(result),
            ),
        ),
    )
    assert editor.prompts() == [TextPrompt(prefix="s = '😀' + ", suffix="\n")]


async def test_completion_leaves_a_client_with_inline_completion_to_it(start_editor):
    editor = await start_editor(
        with_inline_completion(lsp.PositionEncodingKind.Utf16), {"text": "1"}
    )
    position = editor.open("a.py", f"x = {CARET}\n")

    result = await asyncio.wait_for(
        editor.client.text_document_completion_async(
            lsp.CompletionParams(
                text_document=lsp.TextDocumentIdentifier(uri=(editor.root / "a.py").as_uri()),
                position=position,
            )
        ),
        WAIT,
    )

    assert result is None
    assert editor.prompts() == []


async def test_accepting_an_item_is_recorded_in_the_trace_store(start_editor):
    editor = await start_editor(
        with_inline_completion(lsp.PositionEncodingKind.Utf16), {"text": "foo()"}
    )
    position = editor.open("a.py", f"x = {CARET}\n")
    [item] = (await editor.inline("a.py", position)).items

    # What an editor does when the user accepts the item: run its command.
    assert item.command is not None
    assert (
        await asyncio.wait_for(
            editor.client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(
                    command=item.command.command, arguments=item.command.arguments
                )
            ),
            WAIT,
        )
        is None
    )

    await editor.stop()
    store = editor.store()
    record = store.completion(item.command.arguments[0])
    assert record is not None
    assert [event.kind for event in record.events] == ["accepted"]
    store.close()


async def test_an_engine_failure_is_a_request_error_without_a_traceback(start_editor):
    # A script with no reply: the engine refuses the request.
    editor = await start_editor(with_inline_completion(lsp.PositionEncodingKind.Utf16))
    position = editor.open("a.py", f"x = {CARET}\n")

    with pytest.raises(JsonRpcException) as failed:
        await editor.inline("a.py", position)

    assert failed.value.code == -32803
    assert "the script has only 0 replies" in failed.value.message
    assert failed.value.data == {"kind": "engine_bad_request"}
