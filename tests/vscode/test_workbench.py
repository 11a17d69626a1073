"""The packaged extension in a real VS Code workbench (code-server), against the real
`opencomposer lsp` it starts, with a fake OpenAI upstream as the model."""

import os
import re
import signal
from pathlib import Path

import pytest
from support.code_server import CodeServer
from support.fake_openai import Compose, Endless, FakeOpenAI, Fill
from support.workbench import MOD, Workbench, rendered, until


def test_the_extension_starts_its_server_and_logs_at_the_right_level(
    workbench: Workbench, code_server: CodeServer, project
) -> None:
    # vscode-languageclient launches `opencomposer lsp` with the --stdio it appends.
    (server,) = code_server.servers(project)
    command = Path(f"/proc/{server}/cmdline").read_bytes().split(b"\0")
    assert command[-2:] == [b"--stdio", b""] and b"lsp" in command
    # The server's INFO line reached the output channel at its level; nothing shows as an error.
    log = code_server.output_channel()
    assert re.search(r"\[info\] lsp\.server: opencomposer \S+ serving code-server", log), log
    assert "[error]" not in log, log


def test_ask_streams_the_reply_into_the_chat(workbench: Workbench, upstream: FakeOpenAI) -> None:
    reply = "Twice doubles its argument: twice(3) is 6, and it works on strings too."
    upstream.enqueue(Compose(text=reply, delay=0.05))
    workbench.run_command("opencomposer: Ask")
    workbench.answer_input("Ask opencomposer", "What does twice do?")
    seen = []
    until("the whole reply", lambda: seen.append(workbench.chat_text()) or reply in seen[-1])
    partial = [text for text in seen if "Twice doubles" in text and reply not in text]
    assert partial, "the reply appeared at once, not streamed"
    assert "What does twice do?" in seen[-1]
    (request,) = upstream.chat_requests
    assert "What does twice do?" in str(request["body"]["messages"])


DOUBLE_BY_ADDING = ("edit_file", {"path": "util.py", "old_string": "x * 2", "new_string": "x + x"})


def test_an_edit_to_an_open_file_goes_through_the_editor_and_undoes_there(
    workbench: Workbench, upstream: FakeOpenAI, project
) -> None:
    workbench.open_file("util.py")
    upstream.enqueue(Compose(calls=[DOUBLE_BY_ADDING]), Compose(text="Doubled by adding."))
    workbench.send("Double by adding")
    workbench.until_chat_shows("Doubled by adding")
    until("the edit in the buffer", lambda: "x + x" in workbench.editor_text())
    # Through workspace/applyEdit: the buffer is changed and unsaved, the disk is not.
    assert workbench.is_dirty("util.py")
    assert (project / "util.py").read_text() == "def twice(x):\n    return x * 2\n"
    workbench.focus_editor()
    workbench.page.keyboard.press(f"{MOD}+Z")
    until("the edit undone in the editor", lambda: "x * 2" in workbench.editor_text())
    assert "x + x" not in workbench.editor_text()


def test_an_edit_to_a_closed_file_is_written_shown_and_reverted(
    workbench: Workbench, upstream: FakeOpenAI, project
) -> None:
    upstream.enqueue(Compose(calls=[DOUBLE_BY_ADDING]), Compose(text="Doubled by adding."))
    workbench.send("Double by adding")
    workbench.until_chat_shows("Doubled by adding")
    assert (project / "util.py").read_text() == "def twice(x):\n    return x + x\n"
    assert workbench.page.locator('.tab[data-resource-name="util.py"]').count() == 0
    # The chat tells of the change, its diff a click away: the file as it was against the file.
    assert "util.py" in workbench.chat_text()
    workbench.chat_button("Open diff").click()
    modified = workbench.page.locator(".monaco-diff-editor .editor.modified .view-lines")
    until("the diff", lambda: "x + x" in rendered(modified))
    # The file is open now, so the revert goes through the editor too; saving writes it.
    workbench.chat_button("Revert turn").click()
    workbench.until_notified("Reverted util.py")
    until("the revert in the editor", lambda: "x * 2" in rendered(modified))
    modified.click()
    workbench.page.keyboard.press(f"{MOD}+S")
    until(
        "the reverted file saved",
        lambda: (project / "util.py").read_text() == "def twice(x):\n    return x * 2\n",
    )


# The folder's settings: approval asked for every write (the extension passes `--approval ask`
# to the server it starts).
@pytest.mark.files({".vscode/settings.json": '{"opencomposer.approval": "ask"}'})
def test_approvals_are_answered_in_the_chat(
    workbench: Workbench, upstream: FakeOpenAI, project
) -> None:
    upstream.enqueue(Compose(calls=[DOUBLE_BY_ADDING]), Compose(text="Doubled by adding."))
    workbench.send("Double by adding")
    workbench.chat_button("Approve").first.wait_for()
    workbench.chat_button("Approve").first.click()
    workbench.until_chat_shows("Doubled by adding")
    assert "x + x" in (project / "util.py").read_text()

    write = ("write_file", {"path": "new.py", "content": "print('new')\n"})
    upstream.enqueue(Compose(calls=[write]), Compose(text="Left it alone."))
    workbench.send("Write new.py")
    workbench.chat_button("Deny").first.wait_for()
    workbench.chat.locator(".approval.pending .approval-note").fill("put it in util.py instead")
    workbench.chat.locator(".approval.pending").get_by_role("button", name="Deny").click()
    workbench.until_chat_shows("Left it alone")
    assert not (project / "new.py").exists()
    assert "put it in util.py instead" in str(upstream.chat_requests[-1]["body"]["messages"])


def test_stop_interrupts_a_streaming_turn(workbench: Workbench, upstream: FakeOpenAI) -> None:
    upstream.enqueue(Endless(interval=0.05))
    workbench.send("Count forever")
    workbench.until_chat_shows("tick tick")
    stop = workbench.chat.locator("#stop")
    stop.click()
    until("the model's stream closed", lambda: upstream.disconnects)
    stop.wait_for(state="hidden")
    assert workbench.chat.locator("#send").inner_text() == "Send"


def test_an_inline_completion_shows_as_ghost_text_and_tab_accepts_it(
    workbench: Workbench, upstream: FakeOpenAI, project
) -> None:
    upstream.fill = Fill(" * 3")
    workbench.open_file("util.py")
    page = workbench.page
    page.keyboard.press(f"{MOD}+End")
    page.keyboard.type("\ndef thrice(x):\n")
    # As a person types: VS Code asks for inline completions once the typing pauses.
    page.keyboard.type("return x", delay=120)
    ghost = page.locator(".ghost-text-decoration")
    until("the ghost text", lambda: "* 3" in rendered(ghost))
    page.keyboard.press("Tab")
    until("the completion accepted", lambda: "return x * 3" in workbench.editor_text())
    assert any(not r["path"].endswith("/chat/completions") for r in upstream.requests)


LINT_TASK = """{
  "version": "2.0.0",
  "tasks": [{
    "label": "lint",
    "type": "shell",
    "command": "echo 'util.py:2:12: error: twice must not use multiplication'",
    "runOptions": {"runOn": "folderOpen"},
    "presentation": {"reveal": "never"},
    "problemMatcher": {
      "owner": "lint",
      "fileLocation": ["relative", "${workspaceFolder}"],
      "pattern": {"regexp": "^(.*):(\\\\d+):(\\\\d+): (error|warning): (.*)$",
                  "file": 1, "line": 2, "column": 3, "severity": 4, "message": 5}
    }
  }]
}"""


# A lint task run when the folder opens, its output read by a problem matcher: diagnostics
# that come from the workbench, not from opencomposer's server.
@pytest.mark.files({".vscode/tasks.json": LINT_TASK})
def test_fix_on_a_problem_matcher_diagnostic_sends_it_to_the_model(
    workbench: Workbench, upstream: FakeOpenAI
) -> None:
    workbench.open_file("util.py")
    workbench.until_squiggle()
    upstream.enqueue(Compose(calls=[DOUBLE_BY_ADDING]), Compose(text="Fixed."))
    workbench.go_to_line(2, 12)
    workbench.quick_fix("Fix with opencomposer")
    workbench.until_chat_shows("Fixed.")
    assert "twice must not use multiplication" in str(upstream.chat_requests[0]["body"]["messages"])


def test_a_crashed_server_is_restarted_with_a_message(
    workbench: Workbench, code_server: CodeServer, upstream: FakeOpenAI, project
) -> None:
    (first,) = until("the language server", lambda: code_server.servers(project))
    os.kill(first, signal.SIGKILL)
    workbench.until_notified("language server stopped unexpectedly.*Restarting it")
    until("a new server", lambda: [p for p in code_server.servers(project) if p != first])
    # Asked before the new server has initialized, the question would be refused.
    until(
        "the new server to initialize",
        lambda: code_server.output_channel().count(f"workspace folders {project}") == 2,
    )
    upstream.enqueue(Compose(text="Back again."))
    workbench.run_command("opencomposer: Ask")
    workbench.answer_input("Ask opencomposer", "Are you there?")
    workbench.until_chat_shows("Back again")
