"""The agent over LSP, end to end: the real server process with a scripted model, driven by
clients that declare Neovim's, VS Code's or Emacs' recorded capabilities.

Covered: what `initialize` advertises; the editor's unsaved buffers as what the agent reads;
a turn whose edits reach an open buffer through `workspace/applyEdit` and a closed file on
disk, with its events in order; a refused edit falling back to disk with a warning;
approvals asked with `opencomposer/approval/request`, and with `window/showMessageRequest` for an
editor that only runs a command (with work-done progress and a final message); interrupting
a turn; the quick fix code action and the turn it starts; the JSON-RPC errors of the
`opencomposer/*` methods.
"""

from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from support.lsp_editor import PROJECT, Editor, as_json, text_edits, until
from support.scripted_engine import call

from opencomposer import __version__

# A server message that breaks the client's declared capabilities (pytest-lsp's checks: a
# progress report for a token never created, say) fails the test.
pytestmark = pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")

APP, UTIL = "src/app.py", "src/util.py"
APP_TEXT, UTIL_TEXT = PROJECT[APP], PROJECT[UTIL]
FIXED_APP_TEXT = APP_TEXT.replace("+ nme", "+ name")

ASK_FOR_WRITES = {"OPENCOMPOSER_AGENT__APPROVAL__WRITES_WORKSPACE": "ask"}

FIX_TYPO = call("edit_file", path=APP, old_string="+ nme", new_string="+ name")
DOUBLE_BY_ADDING = call("edit_file", path=UTIL, old_string="x * 2", new_string="x + x")


def numbered(text: str) -> str:
    """`read_file`'s rendering of a whole file."""
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.splitlines(), start=1))


def assert_in_order(events: list[dict[str, Any]]) -> None:
    """One thread's events, numbered from 1 without gap or repeat."""
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["thread_id"] for e in events}) == 1


async def run_turn(editor: Editor, text: str, *replies: dict[str, Any]) -> dict[str, Any]:
    """Script the model, start a thread and a turn over the protocol; the completed turn."""
    editor.script_replies(*replies)
    thread_id = await editor.start_thread()
    turn_id = await editor.start_turn(thread_id, text)
    return await editor.turn_completed(turn_id)


# ---------------------------------------------------------------------- initialize


async def test_initialize_advertises_the_agent(launch, profile):
    editor = await launch(profile)

    capabilities = editor.initialize_result.capabilities
    assert (
        capabilities.position_encoding
        == {
            "neovim": lsp.PositionEncodingKind.Utf8,  # the first of the client's preferences
            "visual_studio_code": lsp.PositionEncodingKind.Utf16,  # it declares none
            "emacs": lsp.PositionEncodingKind.Utf32,
        }[profile]
    )
    assert capabilities.text_document_sync.change == lsp.TextDocumentSyncKind.Incremental
    assert capabilities.inline_completion_provider == lsp.InlineCompletionOptions()
    assert as_json(capabilities.code_action_provider) == {
        "codeActionKinds": ["quickfix", "refactor"]
    }
    commands = [
        "opencomposer.ask",
        "opencomposer.completion.accepted",
        "opencomposer.completion.partiallyAccepted",
        "opencomposer.completion.rejected",
        "opencomposer.completion.shown",
        "opencomposer.explain",
        "opencomposer.fix",
        "opencomposer.stop",
        "opencomposer.tests",
    ]
    assert sorted(capabilities.execute_command_provider.commands) == commands
    assert as_json(capabilities.experimental) == {
        "opencomposer": {
            "version": __version__,
            "methods": [
                "opencomposer/thread/start",
                "opencomposer/thread/list",
                "opencomposer/thread/read",
                "opencomposer/thread/events",
                "opencomposer/thread/subscribe",
                "opencomposer/thread/undo",
                "opencomposer/turn/start",
                "opencomposer/turn/interrupt",
                "opencomposer/turn/steer",
                "opencomposer/approval/respond",
            ],
            "events": "opencomposer/event",
            "approvals": "opencomposer/approval/request",
            "commands": commands,
        }
    }


# ---------------------------------------------------------------------- buffers and edits


async def test_the_agent_reads_unsaved_buffers(launch, profile, workspace):
    editor = await launch(profile)
    buffer = editor.open(APP)
    editor.type(buffer, "+ nme", "+ name")
    # After the wide characters: the position differs in each encoding.
    editor.type(buffer, '😀"))', '😀", "and 🌍"))')

    await run_turn(
        editor, "Read app.py", {"calls": [call("read_file", path=APP)]}, {"text": "It greets."}
    )

    unsaved = FIXED_APP_TEXT.replace('😀"))', '😀", "and 🌍"))')
    [read] = editor.items("file_read")
    assert (read["status"], read["output"]) == ("completed", numbered(unsaved))
    assert (workspace / APP).read_text() == APP_TEXT


async def test_a_turn_edits_open_buffers_through_the_editor_and_closed_files_on_disk(
    launch, profile, workspace
):
    # Revealing files is off by default for protocol clients (their chat shows the changes).
    editor = await launch(profile, env={"OPENCOMPOSER_LSP__REVEAL_EDITS": "true"})
    buffer = editor.open(APP)

    turn = await run_turn(
        editor,
        "Fix the typo and double by adding",
        {"calls": [FIX_TYPO, DOUBLE_BY_ADDING]},
        {"calls": [call("read_file", path=APP)]},  # the edit is seen before it is saved
        {"text": "Fixed the typo; twice() adds."},
    )

    # The open file: one edit of the buffer, made against the version the editor had.
    edit = lsp.TextEdit(
        range=lsp.Range(
            start=lsp.Position(line=1, character=0), end=lsp.Position(line=2, character=0)
        ),
        new_text='    return "hello " + name\n',
    )
    if profile == "neovim":  # it does not declare `documentChanges`
        expected = lsp.WorkspaceEdit(changes={buffer.uri: [edit]})
    else:
        expected = lsp.WorkspaceEdit(
            document_changes=[
                lsp.TextDocumentEdit(
                    text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                        uri=buffer.uri, version=1
                    ),
                    edits=[edit],
                )
            ]
        )
    assert as_json(editor.edits) == as_json(
        [lsp.ApplyWorkspaceEditParams(edit=expected, label="opencomposer: app.py")]
    )
    assert buffer.text == FIXED_APP_TEXT
    assert (workspace / APP).read_text() == APP_TEXT  # until the user saves
    assert (workspace / UTIL).read_text() == UTIL_TEXT.replace("x * 2", "x + x")

    changes = editor.items("file_change")
    assert [(c["status"], c["changes"][0]["path"]) for c in changes] == [
        ("completed", APP),
        ("completed", UTIL),
    ]
    [read] = editor.items("file_read")
    assert read["output"] == numbered(FIXED_APP_TEXT)

    # Each changed file is shown, without taking focus, by editors that can.
    shown = {(d.uri, d.take_focus) for d in editor.client.shown_documents}
    if profile == "emacs":  # no `window/showDocument`
        assert shown == set()
    else:
        assert shown == {(buffer.uri, False), ((workspace / UTIL).as_uri(), False)}

    assert_in_order(editor.events)
    assert [e["type"] for e in editor.events[:2]] == ["thread.started", "turn.started"]
    assert editor.events[-1]["type"] == "turn.completed"
    assert (turn["status"], turn["stop_reason"]) == ("completed", "answered")

    editor.save(buffer)
    assert (workspace / APP).read_text() == FIXED_APP_TEXT


async def test_a_refused_edit_is_written_to_disk_and_the_user_told(launch, workspace):
    editor = await launch("visual_studio_code")
    buffer = editor.open(APP)
    editor.accept_edits = False
    say_hi = call("edit_file", path=APP, old_string='"hello "', new_string='"hi "')

    turn = await run_turn(
        editor,
        "Fix the typo, then say hi",
        {"calls": [FIX_TYPO]},
        {"calls": [say_hi]},
        {"calls": [call("read_file", path=APP)]},
        {"text": "Fixed."},
    )

    assert len(editor.edits) == 2
    assert buffer.text == APP_TEXT
    # The second edit started from the first: the agent reads what it wrote, not the buffer.
    both = FIXED_APP_TEXT.replace('"hello "', '"hi "')
    assert (workspace / APP).read_text() == both
    [read] = editor.items("file_read")
    assert read["output"] == numbered(both)
    warning = lsp.ShowMessageParams(
        type=lsp.MessageType.Warning,
        message="opencomposer wrote app.py to disk: the editor did not take the edit (the "
        "buffer is read-only). Reload the file to see it.",
    )
    assert editor.client.messages == [warning, warning]
    assert turn["status"] == "completed"


# ---------------------------------------------------------------------- approvals


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_approvals_are_asked_with_the_protocol_request(launch, workspace, decision):
    editor = await launch("neovim", env=ASK_FOR_WRITES)
    editor.approval = {"decision": decision, "message": "not now" if decision == "deny" else None}

    turn = await run_turn(
        editor,
        "Double by adding",
        {"calls": [DOUBLE_BY_ADDING]},
        {"text": "Done." if decision == "approve" else "Left it."},
    )

    [change] = editor.items("file_change")
    [request] = editor.approvals
    assert request["thread_id"] == turn["thread_id"]
    assert {
        key: request["item"][key]
        for key in ("type", "target_item_id", "tool", "action_class", "decision")
    } == {
        "type": "approval_request",
        "target_item_id": change["id"],
        "tool": "edit_file",
        "action_class": "writes_workspace",
        "decision": None,
    }
    [decided] = editor.items("approval_request")
    assert (decided["decision"], decided["decided_by"]) == (decision, "client")
    if decision == "approve":
        assert change["status"] == "completed"
        assert (workspace / UTIL).read_text() == UTIL_TEXT.replace("x * 2", "x + x")
    else:  # the model is told, and the turn goes on
        assert change["status"] == "declined"
        assert "the call was not approved: not now" in change["output"]
        assert (workspace / UTIL).read_text() == UTIL_TEXT
    assert turn["status"] == "completed"
    assert editor.client.shown_documents == []  # its chat shows the change


async def test_a_plain_editor_runs_a_command_with_progress_prompts_and_a_final_message(
    launch, workspace
):
    editor = await launch("visual_studio_code", speaks_protocol=False, env=ASK_FOR_WRITES)
    buffer = editor.open(APP)
    editor.script_replies(
        {"calls": [DOUBLE_BY_ADDING]},
        {"calls": [call("read_file", path=UTIL)]},
        {"text": "twice() now adds."},
    )

    started = as_json(
        await editor.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                command="opencomposer.ask",
                arguments=[{"text": "Make twice() add", "uri": buffer.uri}],
            )
        )
    )

    assert set(started) == {"thread_id", "turn_id"}
    [message] = await until(lambda: editor.client.messages, "the final message")
    assert message == lsp.ShowMessageParams(type=lsp.MessageType.Info, message="twice() now adds.")
    [prompt] = editor.message_requests
    assert prompt.type == lsp.MessageType.Warning
    assert prompt.message.startswith("opencomposer wants to run edit_file:")
    assert [action.title for action in prompt.actions] == [
        "Approve",
        "Approve for this thread",
        "Deny",
        "Stop the turn",
    ]
    assert (workspace / UTIL).read_text() == UTIL_TEXT.replace("x * 2", "x + x")

    [progress] = editor.client.progress_reports.values()
    assert progress[0] == lsp.WorkDoneProgressBegin(
        title="opencomposer", message="thinking", cancellable=True
    )
    assert lsp.WorkDoneProgressReport(message=f"read {UTIL}") in progress[1:-1]
    assert all(isinstance(p, lsp.WorkDoneProgressReport) for p in progress[1:-1])
    assert progress[-1] == lsp.WorkDoneProgressEnd(message="completed")
    assert editor.events == []  # it never asked for the protocol's events
    # With no chat of its own, the editor is shown the changed file.
    assert [(d.uri, d.take_focus) for d in editor.client.shown_documents] == [
        ((workspace / UTIL).as_uri(), False)
    ]


# ---------------------------------------------------------------------- interrupt


async def test_interrupting_a_turn(launch):
    editor = await launch("neovim")
    editor.script_replies({"text": "Let me think about this for a long while", "hang_after": 1})
    thread_id = await editor.start_thread()
    turn_id = await editor.start_turn(thread_id, "Think hard")
    await until(
        lambda: editor.items("agent_message", event="item.started"), "the model to start answering"
    )

    result = await editor.request("turn/interrupt", {"thread_id": thread_id, "turn_id": turn_id})

    assert result["turn"]["status"] == "interrupted"
    turn = await editor.turn_completed(turn_id)
    assert (turn["status"], turn["stop_reason"]) == ("interrupted", "interrupted")
    [message] = editor.items("agent_message")
    assert message["status"] == "interrupted"
    assert_in_order(editor.events)


# ---------------------------------------------------------------------- code actions


async def test_the_quick_fix_starts_a_turn_about_the_diagnostic(launch):
    editor = await launch("visual_studio_code")
    buffer = editor.open(APP)
    typo = lsp.Range(
        start=lsp.Position(line=1, character=23), end=lsp.Position(line=1, character=26)
    )
    diagnostic = lsp.Diagnostic(
        range=typo,
        message="undefined name 'nme'",
        source="pyflakes",
        severity=lsp.DiagnosticSeverity.Error,
    )
    cursor = lsp.Range(start=typo.start, end=typo.start)

    actions = await editor.client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=buffer.uri),
            range=cursor,
            context=lsp.CodeActionContext(diagnostics=[diagnostic]),
        )
    )

    argument = {
        "uri": buffer.uri,
        "range": {"start": {"line": 1, "character": 23}, "end": {"line": 1, "character": 26}},
        "diagnostics": [
            {
                "range": {
                    "start": {"line": 1, "character": 23},
                    "end": {"line": 1, "character": 26},
                },
                "message": "undefined name 'nme'",
                "source": "pyflakes",
                "severity": 1,
            }
        ],
    }
    assert as_json(actions) == as_json(
        [
            lsp.CodeAction(
                title="Fix with opencomposer: undefined name 'nme'",
                kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                command=lsp.Command(
                    title="Fix with opencomposer", command="opencomposer.fix", arguments=[argument]
                ),
            )
        ]
    )

    editor.script_replies({"text": "Fixed."})
    started = as_json(
        await editor.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                command=actions[0].command.command, arguments=actions[0].command.arguments
            )
        )
    )
    await editor.turn_completed(started["turn_id"])

    [request] = editor.items("user_message")
    assert request["content"] == [
        {
            "type": "text",
            "text": "Fix this problem in src/app.py:\n- line 2: undefined name 'nme' (pyflakes)\n"
            "Make the smallest change that fixes it, then check it (run the relevant "
            "test or linter if there is one).",
        },
        {
            "type": "file",
            "path": APP,
            "range": {"start": 2, "end": 2},
            "text": '    return "hello " + nme\n',
            "note": None,
        },
    ]


async def test_a_selection_offers_explain_and_tests(launch):
    editor = await launch("neovim")
    buffer = editor.open(APP)
    selection = lsp.Range(
        start=lsp.Position(line=0, character=0), end=lsp.Position(line=2, character=0)
    )

    actions = await editor.client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=buffer.uri),
            range=selection,
            context=lsp.CodeActionContext(diagnostics=[]),
        )
    )

    argument = {
        "uri": buffer.uri,
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": 0}},
    }
    assert as_json(actions) == [
        {
            "title": title,
            "kind": "refactor",
            "command": {"title": title, "command": command, "arguments": [argument]},
        }
        for title, command in (
            ("Explain this with opencomposer", "opencomposer.explain"),
            ("Write tests for this with opencomposer", "opencomposer.tests"),
        )
    ]


# ---------------------------------------------------------------------- errors


async def error_of(editor: Editor, method: str, params: dict[str, Any]) -> tuple[int, Any]:
    with pytest.raises(JsonRpcException) as caught:
        await editor.request(method, params)
    return caught.value.code, as_json(caught.value.data)


async def test_protocol_errors_carry_their_kind(launch, tmp_path):
    editor = await launch("neovim")
    thread_id = await editor.start_thread()

    assert await error_of(editor, "thread/read", {"thread_id": "thr_missing"}) == (
        -32602,
        {"kind": "not_found"},
    )
    assert await error_of(editor, "turn/start", {"thread_id": thread_id, "input": []}) == (
        -32602,
        {"kind": "invalid_request"},
    )
    assert await error_of(editor, "thread/start", {}) == (-32602, {"kind": "invalid_request"})
    # A folder that is neither the editor's nor a configured root.
    assert await error_of(editor, "thread/start", {"workspace": str(tmp_path)}) == (
        -32803,
        {"kind": "forbidden"},
    )
    assert (await error_of(editor, "thread/delete", {"thread_id": thread_id}))[0] == -32601


async def test_a_turn_edits_two_open_files_through_the_editor(launch, profile, workspace):
    editor = await launch(profile)
    app, util = editor.open(APP), editor.open(UTIL)

    turn = await run_turn(
        editor,
        "Fix the typo and double by adding",
        {"calls": [FIX_TYPO, DOUBLE_BY_ADDING]},
        {"text": "Done."},
    )

    assert turn["status"] == "completed"
    edited = [uri for params in editor.edits for uri, _ in text_edits(params.edit)]
    assert edited == [app.uri, util.uri]  # one workspace/applyEdit per file, in call order
    assert (app.text, util.text) == (FIXED_APP_TEXT, UTIL_TEXT.replace("x * 2", "x + x"))
    # Nothing reached the disk: the buffers hold the changes until the user saves.
    assert ((workspace / APP).read_text(), (workspace / UTIL).read_text()) == (APP_TEXT, UTIL_TEXT)
