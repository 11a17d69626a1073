"""Settings and folders an editor changes while connected: `workspace/didChangeConfiguration`
(the `opencomposer` section; the engine and the approval policy are not the editor's to set)
and `workspace/didChangeWorkspaceFolders` (threads may be bound to a folder once added)."""

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from support.lsp_editor import until

pytestmark = pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")


def completion_params(uri: str) -> lsp.CompletionParams:
    return lsp.CompletionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line=1, character=4),
    )


async def test_completion_can_be_turned_off_and_bad_settings_are_reported(launch):
    editor = await launch("neovim")  # no inline completion: the completion fallback answers
    editor.script_replies({"text": "return x + x"})
    buffer = editor.open("src/util.py")

    editor.client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(
            settings={"opencomposer": {"completion": {"enabled": False}}}
        )
    )
    off = await editor.client.text_document_completion_async(completion_params(buffer.uri))

    editor.client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(
            settings={"opencomposer": {"completion": {"debounce_ms": "soon"}}}
        )
    )
    [message] = await until(lambda: editor.client.messages, "the error message")
    editor.client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(
            settings={"opencomposer": {"completion": {"enabled": True, "debounce_ms": 0}}}
        )
    )
    on = await editor.client.text_document_completion_async(completion_params(buffer.uri))

    assert off is None
    assert message.type == lsp.MessageType.Error
    assert "invalid opencomposer settings" in message.message
    assert [item.text_edit.new_text for item in on.items] == ["return x + x"]


async def test_engine_and_approvals_are_not_taken_from_the_editor(launch, workspace):
    editor = await launch("neovim", env={"OPENCOMPOSER_AGENT__APPROVAL__WRITES_WORKSPACE": "ask"})
    editor.client.workspace_did_change_configuration(
        lsp.DidChangeConfigurationParams(
            settings={
                "opencomposer": {
                    "approval": {"writes_workspace": "auto"},
                    "engine": {"backend": "openai"},
                }
            }
        )
    )
    editor.script_replies(
        {"calls": [["write_file", {"path": "new.txt", "content": "x\n"}]]}, {"text": "Wrote it."}
    )
    editor.approval = {"decision": "deny"}
    thread_id = await editor.start_thread()
    turn = await editor.turn_completed(await editor.start_turn(thread_id, "Write new.txt"))

    assert turn["status"] == "completed"
    assert len(editor.approvals) == 1  # still asked: the editor cannot loosen the policy
    assert not (workspace / "new.txt").exists()


async def test_a_folder_added_by_the_editor_can_hold_threads(launch, tmp_path):
    editor = await launch("neovim")
    other = tmp_path / "other-project"
    other.mkdir()
    # The configured roots default to the home folder; tmp_path lies outside the test's HOME.
    with pytest.raises(JsonRpcException) as refused:
        await editor.request("thread/start", {"workspace": str(other)})
    assert refused.value.data["kind"] == "forbidden"

    editor.client.workspace_did_change_workspace_folders(
        lsp.DidChangeWorkspaceFoldersParams(
            event=lsp.WorkspaceFoldersChangeEvent(
                added=[lsp.WorkspaceFolder(uri=other.as_uri(), name="other")], removed=[]
            )
        )
    )
    # Messages are handled in order: the request sees the folder the notification added.
    started = await editor.request("thread/start", {"workspace": str(other)})

    assert started["thread"]["workspace"] == str(other.resolve())
