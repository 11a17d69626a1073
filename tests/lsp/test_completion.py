"""Inline completion against the scripted engine: the fill-in-the-middle prompt cut at the right
character in every position encoding, one line or a block, trimming what the suffix already
has, related documents, debounce and cancel-previous (streams closed), telemetry in the trace
store with redaction, and the LSP items."""

import asyncio
import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from lsprotocol.types import (
    Command,
    CompletionItem,
    CompletionItemKind,
    InlineCompletionItem,
    InsertTextFormat,
    Position,
    PositionEncodingKind,
    Range,
    TextEdit,
)
from pygls.workspace import PositionCodec, TextDocument
from support.scripted_engine import Reply, ScriptedEngine

from opencomposer.agent.traces.base import CompletionEvent, CompletionRecord, TraceStore
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore
from opencomposer.config import CompletionSettings
from opencomposer.lsp.completion import (
    ACCEPTED_COMMAND,
    InlineCompleter,
    Proposal,
    completion_items,
    inline_items,
)
from opencomposer.redact import MASK
from opencomposer.serving.engines.base import SamplingParams, TextPrompt

CARET = "‸"
"""Marks the cursor in a test document's text."""

ROOT = Path("/w")
T = datetime(2026, 1, 1, tzinfo=UTC)


def document(
    marked: str,
    *,
    path: str = "/w/src/a.py",
    language: str = "python",
    encoding: PositionEncodingKind = PositionEncodingKind.Utf16,
) -> tuple[TextDocument, Position]:
    """A document from text with a caret, and the caret's position in `encoding` units
    (counted here from the encoded text, independently of pygls)."""
    before, _, after = marked.partition(CARET)
    column = before[before.rfind("\n") + 1 :]
    units = {
        PositionEncodingKind.Utf8: len(column.encode("utf-8")),
        PositionEncodingKind.Utf16: len(column.encode("utf-16-le")) // 2,
        PositionEncodingKind.Utf32: len(column),
    }[encoding]
    doc = TextDocument(
        f"file://{path}",
        before + after,
        version=1,
        language_id=language,
        position_codec=PositionCodec(encoding),
    )
    return doc, Position(line=before.count("\n"), character=units)


def completer(
    *replies: Reply, store: TraceStore | None = None, **settings: object
) -> tuple[InlineCompleter, ScriptedEngine]:
    engine = ScriptedEngine(list(replies))
    options = CompletionSettings.model_validate({"debounce_ms": 0, **settings})
    return InlineCompleter(engine, options, store), engine


async def complete_text(marked: str, reply: str) -> str | None:
    inline, _ = completer(Reply(text=reply))
    proposal = await inline.complete(*document(marked))
    return None if proposal is None else proposal.text


@pytest.mark.parametrize(
    "encoding", [PositionEncodingKind.Utf16, PositionEncodingKind.Utf8, PositionEncodingKind.Utf32]
)
async def test_prompt_is_cut_at_the_cursor_after_wide_characters(encoding):
    doc, position = document(
        f"first = 1\ns = '😀中文𝄞é' + {CARET}f(x)\nlast = 2\n", encoding=encoding
    )
    inline, engine = completer(Reply(text="g"))

    proposal = await inline.complete(doc, position)

    assert engine.requests[0].prompt == TextPrompt(
        prefix="first = 1\ns = '😀中文𝄞é' + ", suffix="f(x)\nlast = 2\n"
    )
    assert engine.requests[0].sampling == SamplingParams(
        max_tokens=64, temperature=0.0, stop=["\n"]
    )
    assert engine.requests[0].model is None
    assert proposal == Proposal(
        id=proposal.id,
        text="g",
        range=Range(position, position),
        uri="file:///w/src/a.py",
        model="scripted-model",
        multiline=False,
    )


async def test_prefix_and_suffix_budgets_end_at_whole_lines():
    lines = [f"line{n:02} = {n:06}\n" for n in range(30)]  # 16 characters each
    doc, position = document(
        "".join(lines[:15]) + "line" + CARET + lines[15][4:] + "".join(lines[16:])
    )
    inline, engine = completer(Reply(text="x"), prefix_chars=100, suffix_chars=40)

    await inline.complete(doc, position)

    # 100 characters back is exactly the start of line 9; 40 forward is inside line 17.
    assert engine.requests[0].prompt == TextPrompt(
        prefix="".join(lines[9:15]) + "line", suffix=lines[15][4:] + lines[16]
    )


async def test_code_after_the_cursor_makes_a_one_line_completion():
    doc, position = document(f"x = foo({CARET})\n")
    inline, engine = completer(Reply(text="a, b)\nprint(1)\n"))

    proposal = await inline.complete(doc, position)

    assert (proposal.text, proposal.multiline) == ("a, b", False)
    assert engine.requests[0].sampling.stop == ["\n"]
    assert engine.closed_mid_stream == 1  # the newline ended it: the engine was stopped


@pytest.mark.parametrize(
    ("marked", "reply", "expected"),
    [
        # A blank line, then the next statement at the cursor's level.
        (
            f"def f(a):\n    {CARET}\n\nprint(f(1))\n",
            "total = a + 1\n    return total\n\ndef g():\n    pass\n",
            "total = a + 1\n    return total",
        ),
        # A line indented less than the cursor's leaves the block.
        (f"def f(a):\n    {CARET}\n", "return a\nprint(2)\n", "return a"),
        # At the top level, a block after the cursor's line belongs to the completion.
        (
            f"import os\n{CARET}",
            "\ndef main():\n    return os.getcwd()\n\n    \nmain()\n",
            "\ndef main():\n    return os.getcwd()",
        ),
    ],
)
async def test_an_empty_rest_of_line_makes_a_block_completion(marked, reply, expected):
    doc, position = document(marked)
    inline, engine = completer(Reply(text=reply))

    proposal = await inline.complete(doc, position)

    assert (proposal.text, proposal.multiline) == (expected, True)
    assert engine.requests[0].sampling.stop == []
    assert engine.closed_mid_stream == 1


@pytest.mark.parametrize(
    ("marked", "reply", "expected"),
    [
        (f"x = foo({CARET})\n", "a)", "a"),
        (f"x = foo({CARET})\n", "a)  \t", "a"),
        (f"x = [1, {CARET}]\n", "2, 3]", "2, 3"),
        # A model without fill-in-the-middle writes on past the gap: the suffix's line is cut.
        (f"def f():\n    {CARET}\n    return x\n", "x = 1\n    return x\n", "x = 1"),
        # An inner closing brace is not the suffix's (its indentation differs).
        (
            f"fn f() {{\n    {CARET}\n}}\n",
            "if x {\n        y();\n    }\n}\n",
            "if x {\n        y();\n    }",
        ),
        (f"x = foo({CARET})\n", ")", None),
        (f"x = foo({CARET})\n", "  \n", None),
        (f"x = 1\n{CARET}", "", None),
    ],
)
async def test_trimming_drops_what_the_suffix_already_has(marked, reply, expected):
    assert await complete_text(marked, reply) == expected


async def test_related_documents_of_the_language_come_first_under_their_paths():
    doc, position = document(f"import b\nb.{CARET}\n")
    same = TextDocument(doc.uri, "stale copy of a\n", language_id="python")
    b = TextDocument("file:///w/src/b.py", "one = 1\ntwo = 2\n", language_id="python")
    js = TextDocument("file:///w/c.js", "const c = 1;\n", language_id="javascript")
    outside = TextDocument("file:///elsewhere/d.py", "d = 4", language_id="python")
    inline, engine = completer(Reply(text="one"))

    await inline.complete(doc, position, related=[same, b, js, outside], workspace_root=ROOT)

    assert engine.requests[0].prompt.prefix == (
        "# src/b.py\none = 1\ntwo = 2\n# /elsewhere/d.py\nd = 4\n# src/a.py\nimport b\nb."
    )


async def test_related_documents_fill_their_budget_with_whole_lines():
    doc, position = document(f"let a = {CARET};\n", path="/w/a.ts", language="typescript")
    b = TextDocument("file:///w/b.ts", "let one = 1;\nlet two = 2;\n", language_id="typescript")
    c = TextDocument("file:///w/c.ts", "let three = 3;\n", language_id="typescript")
    inline, engine = completer(Reply(text="1"), related_chars=30)

    await inline.complete(doc, position, related=[b, c], workspace_root=ROOT)

    # "// b.ts\n" (8) + "let one = 1;\n" (13) leave 9 characters: not enough for c.ts.
    assert engine.requests[0].prompt.prefix == "// b.ts\nlet one = 1;\n// a.ts\nlet a = "


async def test_a_newer_request_for_the_document_replaces_a_pending_one():
    inline, engine = completer(Reply(text="second"), debounce_ms=20)

    first = asyncio.create_task(inline.complete(*document(f"a = {CARET}\n")))
    second = asyncio.create_task(inline.complete(*document(f"a = b{CARET}\n")))

    with pytest.raises(asyncio.CancelledError):
        await first
    assert (await second).text == "second"
    assert [r.prompt.prefix for r in engine.requests] == ["a = b"]


async def test_requests_for_different_documents_do_not_cancel_each_other():
    inline, _ = completer(Reply(text="1"), Reply(text="2"), debounce_ms=20)

    results = await asyncio.gather(
        inline.complete(*document(f"a = {CARET}\n", path="/w/a.py")),
        inline.complete(*document(f"b = {CARET}\n", path="/w/b.py")),
    )

    assert sorted(p.text for p in results) == ["1", "2"]


async def test_a_request_replaced_while_streaming_closes_its_stream():
    inline, engine = completer(Reply(text="slow", hang_after=1), Reply(text="fast"))

    first = asyncio.create_task(inline.complete(*document(f"a = {CARET}\n")))
    while not engine.requests:
        await asyncio.sleep(0)
    second = await inline.complete(*document(f"a = {CARET}\n"))

    with pytest.raises(asyncio.CancelledError):
        await first
    assert second.text == "fast"
    assert engine.closed_mid_stream == 1


async def test_cancelling_the_caller_closes_the_stream():
    inline, engine = completer(Reply(text="slow", hang_after=1))

    task = asyncio.create_task(inline.complete(*document(f"a = {CARET}\n")))
    while not engine.requests:
        await asyncio.sleep(0)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert engine.closed_mid_stream == 1


async def test_disabled_completion_asks_nothing():
    inline, engine = completer(Reply(text="x"), enabled=False)

    assert await inline.complete(*document(f"a = {CARET}\n")) is None
    assert engine.requests == []


def at_t(record: CompletionRecord) -> CompletionRecord:
    """The record with its clock readings fixed, to compare whole objects."""
    assert record.duration_ms >= 0
    return dataclasses.replace(
        record,
        at=T,
        duration_ms=0,
        events=[dataclasses.replace(event, at=T) for event in record.events],
    )


async def test_telemetry_is_recorded_and_read_back(tmp_path):
    store = SQLiteTraceStore(tmp_path / "traces.db")
    inline, _ = completer(Reply(text="a)"), Reply(text="b"), store=store)

    first = await inline.complete(*document(f"x = foo({CARET})\n"), workspace_root=ROOT)
    inline.shown(first.id)
    inline.partially_accepted(first.id, 1)
    inline.accepted(first.id)
    second = await inline.complete(*document(f"y = {CARET}\n", path="/w/b.py"), workspace_root=ROOT)
    inline.shown(second.id)
    inline.rejected(second.id)

    expected_first = CompletionRecord(
        id=first.id,
        path="src/a.py",
        text="a",
        prefix_length=8,
        suffix_length=2,
        duration_ms=0,
        workspace="/w",
        language="python",
        model="scripted-model",
        at=T,
        events=[
            CompletionEvent("shown", {}, T),
            CompletionEvent("partially_accepted", {"accepted_length": 1}, T),
            CompletionEvent("accepted", {}, T),
        ],
    )
    assert at_t(store.completion(first.id)) == expected_first
    assert [at_t(r) for r in store.completions()] == [
        dataclasses.replace(
            expected_first,
            id=second.id,
            path="b.py",
            text="b",
            prefix_length=4,
            suffix_length=1,
            events=[CompletionEvent("shown", {}, T), CompletionEvent("rejected", {}, T)],
        ),
        expected_first,
    ]
    assert [r.id for r in store.completions(limit=1)] == [second.id]
    store.close()


async def test_unknown_ids_are_ignored(tmp_path, caplog):
    store = SQLiteTraceStore(tmp_path / "traces.db")
    inline, _ = completer(Reply(text="1"), store=store)
    proposal = await inline.complete(*document(f"a = {CARET}\n"))

    with caplog.at_level(logging.DEBUG, logger="opencomposer.lsp.completion"):
        inline.accepted("no-such-id")
        inline.partially_accepted("no-such-id", 3)

    assert store.completion("no-such-id") is None
    assert store.completion(proposal.id).events == []
    assert "unknown completion 'no-such-id'" in caplog.text
    store.close()
    # Without a store telemetry has nowhere to go, and that is no error either.
    completer()[0].rejected("no-such-id")


async def test_secrets_are_redacted_in_the_store_only(tmp_path):
    store = SQLiteTraceStore(tmp_path / "traces.db")
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    inline, _ = completer(Reply(text=f'{key}"'), store=store)

    proposal = await inline.complete(*document(f'key = "{CARET}"\n'))

    assert proposal.text == key
    assert store.completion(proposal.id).text == MASK
    store.close()


def test_lsp_items_insert_the_text_and_report_acceptance():
    cursor = Position(line=1, character=4)
    proposal = Proposal(
        id="p1",
        text="\n    return total",
        range=Range(cursor, cursor),
        uri="file:///w/a.py",
        model=None,
        multiline=True,
    )
    accepted = Command(title="accepted", command=ACCEPTED_COMMAND, arguments=["p1"])

    assert inline_items(proposal) == [
        InlineCompletionItem(
            insert_text="\n    return total", range=Range(cursor, cursor), command=accepted
        )
    ]
    assert completion_items(proposal) == [
        CompletionItem(
            label="return total",
            kind=CompletionItemKind.Text,
            text_edit=TextEdit(range=Range(cursor, cursor), new_text="\n    return total"),
            insert_text_format=InsertTextFormat.PlainText,
            command=accepted,
        )
    ]
