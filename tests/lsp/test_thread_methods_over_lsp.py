"""The protocol methods a chat client needs beyond starting turns: following a thread it did
not start (`thread/subscribe`, from the `last_seq` of `thread/read`), undoing the agent's edits
(`thread/undo`), approvals withdrawn when decided without the client, and editor commands run
in the client's own chat thread."""

import pytest
from lsprotocol import types as lsp
from support.lsp_editor import PROJECT, as_json, until
from support.scripted_engine import call

pytestmark = pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")

UTIL = "src/util.py"
UTIL_TEXT = PROJECT[UTIL]
ASK_FOR_WRITES = {"OPENCOMPOSER_AGENT__APPROVAL__WRITES_WORKSPACE": "ask"}
DOUBLE_BY_ADDING = call("edit_file", path=UTIL, old_string="x * 2", new_string="x + x")


async def test_a_second_client_follows_a_thread_from_a_snapshot(launch):
    first = await launch("neovim")
    first.script_replies({"text": "Hello."})
    thread_id = await first.start_thread()
    await first.turn_completed(await first.start_turn(thread_id, "Hi"))

    # Another window of the same server session reads the thread, then follows it live.
    snapshot = await first.request("thread/read", {"thread_id": thread_id})
    assert snapshot["last_seq"] == first.events[-1]["seq"]
    first.events.clear()
    subscribed = await first.request(
        "thread/subscribe", {"thread_id": thread_id, "after_seq": snapshot["last_seq"]}
    )
    assert subscribed == {"last_seq": snapshot["last_seq"]}
    first.script_replies({"text": "Again."})
    turn_id = await first.start_turn(thread_id, "Once more")
    await first.turn_completed(turn_id)
    seqs = [e["seq"] for e in first.events]
    # Nothing before the snapshot is sent again, and nothing after it is missed.
    assert seqs == list(range(snapshot["last_seq"] + 1, snapshot["last_seq"] + 1 + len(seqs)))

    # Subscribing from 0 replays the whole log.
    first.events.clear()
    await first.request("thread/subscribe", {"thread_id": thread_id, "after_seq": 0})
    await until(lambda: len(first.events) >= seqs[-1], "the replay")
    assert [e["seq"] for e in first.events] == list(range(1, seqs[-1] + 1))


async def test_undo_puts_back_the_turns_edits(launch, workspace):
    editor = await launch("neovim")
    editor.script_replies({"calls": [DOUBLE_BY_ADDING]}, {"text": "Done."})
    thread_id = await editor.start_thread()
    await editor.turn_completed(await editor.start_turn(thread_id, "Add instead"))
    assert (workspace / UTIL).read_text() == UTIL_TEXT.replace("x * 2", "x + x")

    undone = await editor.request("thread/undo", {"thread_id": thread_id, "scope": "turn"})

    assert [c["path"] for c in undone["restored"]] == [UTIL]
    assert undone["conflicts"] == []
    assert (workspace / UTIL).read_text() == UTIL_TEXT


async def test_an_approval_decided_elsewhere_is_withdrawn(launch, workspace):
    editor = await launch("neovim", env=ASK_FOR_WRITES)
    editor.approval = None  # the user never answers
    editor.script_replies({"calls": [DOUBLE_BY_ADDING]}, {"text": "unused"})
    thread_id = await editor.start_thread()
    turn_id = await editor.start_turn(thread_id, "Add instead")
    await until(lambda: editor.approvals, "the approval request")

    await editor.request("turn/interrupt", {"thread_id": thread_id, "turn_id": turn_id})

    turn = await editor.turn_completed(turn_id)
    assert turn["status"] == "interrupted"
    # The server cancelled its request: the client's handler was told to stop asking.
    await until(lambda: editor.withdrawn, "the approval request to be cancelled")
    assert (workspace / UTIL).read_text() == UTIL_TEXT


async def test_a_command_runs_in_the_chat_thread_it_names(launch):
    editor = await launch("visual_studio_code")
    buffer = editor.open(UTIL)
    editor.script_replies({"text": "It doubles."}, {"text": "It still doubles."})
    thread_id = await editor.start_thread()
    await editor.turn_completed(await editor.start_turn(thread_id, "What is this?"))

    started = as_json(
        await editor.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                command="opencomposer.explain",
                arguments=[
                    {
                        "uri": buffer.uri,
                        "thread_id": thread_id,
                        "range": {
                            "start": {"line": 0, "character": 0},
                            "end": {"line": 1, "character": 0},
                        },
                    }
                ],
            )
        )
    )

    assert started["thread_id"] == thread_id
    turn = await editor.turn_completed(started["turn_id"])
    assert turn["status"] == "completed"
    # A client that shows the chat gets no message box repeating the answer.
    assert editor.client.messages == []


async def test_subscribing_again_asks_a_waiting_approval_once(launch, workspace):
    editor = await launch("neovim", env=ASK_FOR_WRITES)
    editor.approval = None  # the user is thinking about it
    editor.script_replies({"calls": [DOUBLE_BY_ADDING]}, {"text": "Done."})
    thread_id = await editor.start_thread()
    turn_id = await editor.start_turn(thread_id, "Add instead")
    await until(lambda: editor.approvals, "the approval request")

    # Another view of the thread replays its log from the start.
    await editor.request("thread/subscribe", {"thread_id": thread_id, "after_seq": 0})
    await until(
        lambda: sum(e["type"] == "turn.started" for e in editor.events) == 2,
        "the replay to pass the turn's start",
    )
    await editor.request("turn/interrupt", {"thread_id": thread_id, "turn_id": turn_id})
    await editor.turn_completed(turn_id)
    # The withdrawal is a `$/cancelRequest` of its own, not ordered with the turn's events.
    await until(lambda: editor.withdrawn, "the approval request to be cancelled")

    assert len(editor.approvals) == 1  # not asked again by the replay
    assert len(editor.withdrawn) == 1


async def test_threads_are_listed_by_workspace_through_a_symlink(launch, workspace, tmp_path):
    editor = await launch("neovim")
    thread_id = await editor.start_thread()
    link = tmp_path / "link-to-project"
    link.symlink_to(workspace)

    listed = await editor.request("thread/list", {"workspace": str(link)})
    elsewhere = await editor.request("thread/list", {"workspace": str(tmp_path)})

    assert [t["id"] for t in listed["data"]] == [thread_id]
    assert elsewhere["data"] == []
