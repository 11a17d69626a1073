"""Text written by a model, a command or a file never reaches the terminal as control
sequences: what `opencomposer chat` shows (the answer, tool lines, output tails, diffs, to-dos,
errors, the approval prompt), its JSON, the CLI's tables and the log lines on stderr. An
approval prompt shows the whole command on one line, so nothing can rewrite or hide part of
what is approved."""

import io
import json
import logging
import re
from typing import Any

import pytest
from rich.table import Table

from opencomposer.agent.protocol.common import ActionClass, ErrorInfo
from opencomposer.agent.protocol.events import ItemCompletedEvent, ItemDeltaEvent, ItemStartedEvent
from opencomposer.agent.protocol.items import (
    AgentMessageItem,
    ApprovalRequestItem,
    CommandExecutionItem,
    ErrorItem,
    FileChange,
    FileChangeItem,
    FileChangeKind,
    ItemStatus,
    TextDelta,
    TodoEntry,
    TodoListItem,
)
from opencomposer.logs import HumanFormatter
from opencomposer.serving.cli import chat_cmd
from opencomposer.serving.cli.chat_render import TurnPrinter
from opencomposer.serving.cli.output import SafeConsole, print_json
from opencomposer.terminal_text import for_terminal

# Each one would rewrite the screen if printed raw: erase the line and return, move the
# cursor up, set the title (OSC 0) or the clipboard (OSC 52), the 8-bit CSI, conceal (SGR 8),
# backspaces over what came before, and a right-to-left override that reorders the rest.
HOSTILE = [
    "ls -la\x1b[2K\rrm -rf ~",
    "echo ok\x1b[1A\x1b[2Kls",
    "\x1b]0;innocent title\x07rm -rf ~",
    "\x1b]52;c;cm0gLXJmIH4=\x07",
    "\x9b2Krm -rf ~",
    "\x1b[8mrm -rf ~\x1b[28mls",
    "rm -rf ~\b\b\b\b\b\b\b\bls -la   ",
    "ls \u202erm -rf ~\u202c",
    "x\x00y\x7fz\x1bc",
]
# Every control character a terminal could act on (tab and newline are fine).
CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)


def console() -> tuple[SafeConsole, io.StringIO]:
    buffer = io.StringIO()
    return SafeConsole(file=buffer, width=200, highlight=False), buffer


def events_for(text: str) -> list[Any]:
    message = AgentMessageItem(id="item_1", turn_id="t")
    command = CommandExecutionItem(
        id="item_2",
        turn_id="t",
        command=text,
        call_id="c",
        tool="run_terminal",
        arguments={"command": text},
        status=ItemStatus.completed,
        output=f"{text}\nlast {text}",
    )
    change = FileChangeItem(
        id="item_3",
        turn_id="t",
        call_id="c2",
        tool="write_file",
        arguments={},
        status=ItemStatus.completed,
        changes=[
            FileChange(
                path=f"a{text}.txt",
                kind=FileChangeKind.update,
                diff=f"--- a/x\n+++ b/x\n-{text}\n+{text}\n",
            )
        ],
    )
    failed = CommandExecutionItem(
        id="item_4",
        turn_id="t",
        command=text,
        call_id="c3",
        tool="run_terminal",
        arguments={"command": text},
        status=ItemStatus.failed,
        output=text,
    )
    todos = TodoListItem(
        id="item_5",
        turn_id="t",
        call_id="c4",
        tool="todo_write",
        arguments={},
        status=ItemStatus.completed,
        todos=[TodoEntry(content=text, status="pending")],
    )
    error = ErrorItem(id="item_6", turn_id="t", error=ErrorInfo(kind="x", message=text))
    events: list[Any] = [ItemStartedEvent(seq=1, thread_id="th", item=message)]
    events += [
        ItemDeltaEvent(
            seq=2 + n, thread_id="th", turn_id="t", item_id="item_1", delta=TextDelta(text=piece)
        )
        for n, piece in enumerate((text[: len(text) // 2], text[len(text) // 2 :]))
    ]
    events.append(
        ItemCompletedEvent(
            seq=10,
            thread_id="th",
            item=message.model_copy(update={"text": text, "status": ItemStatus.completed}),
        )
    )
    for n, item in enumerate((command, change, failed, todos, error)):
        events.append(ItemStartedEvent(seq=20 + n, thread_id="th", item=item))
        events.append(ItemCompletedEvent(seq=30 + n, thread_id="th", item=item))
    return events


@pytest.mark.parametrize("text", HOSTILE)
def test_chat_shows_no_control_character_of_a_turn(text: str) -> None:
    shown, buffer = console()
    printer = TurnPrinter(shown)
    for event in events_for(text):
        printer.show(event)
    output = buffer.getvalue()
    assert not CONTROLS.search(output), repr(output)
    assert for_terminal(text).split("\n")[0][:12] in output  # shown, as visible escapes


@pytest.mark.parametrize("text", HOSTILE)
def test_a_terminal_gets_only_the_styles_rich_writes(text: str) -> None:
    buffer = io.StringIO()
    printer = TurnPrinter(
        SafeConsole(file=buffer, width=200, force_terminal=True, color_system="standard")
    )
    for event in events_for(text):
        printer.show(event)
    # What is left once rich's own colour codes (SGR, `ESC [ digits m`) are taken out.
    plain = re.sub("\x1b\\[[0-9;]*m", "", buffer.getvalue())
    assert not CONTROLS.search(plain), repr(plain)


@pytest.mark.parametrize(
    "summary",
    [
        *HOSTILE,
        "rm -rf ~\n\n\n\n\n\n\n\n\n\n\n\nls -la",
        "ls -la\r\n" + "\n" * 200 + "git push --force",
    ],
)
async def test_the_approval_prompt_shows_the_whole_command_on_one_line(
    summary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown, buffer = console()
    monkeypatch.setattr(chat_cmd, "out", shown)
    monkeypatch.setattr(chat_cmd.Prompt, "ask", lambda *a, **k: "n" if "[y]" in a[0] else "")

    answered: list[Any] = []

    class Session:
        def respond_approval(self, *args: Any) -> None:
            answered.append(args)

    item = ApprovalRequestItem(
        id="item_9",
        turn_id="t",
        target_item_id="item_8",
        tool="run_terminal[/]\x1b[2K",
        action_class=ActionClass.dangerous,
        summary=summary,
        reason="approval needed by [bold]x\x1b[0m",
    )
    await chat_cmd._ask(Session(), item, interactive=True)
    output = buffer.getvalue()
    assert not CONTROLS.search(output), repr(output)
    prompt_line = output.splitlines()[0]
    assert for_terminal(summary, newlines=False) in prompt_line
    assert "run_terminal[/]" in prompt_line  # markup in a field is shown, not obeyed
    assert answered


@pytest.mark.parametrize("text", HOSTILE)
def test_tables_and_json_carry_no_control_characters(text: str, capsys) -> None:
    shown, buffer = console()
    table = Table("title")
    table.add_row(text)
    shown.print(table)
    assert not CONTROLS.search(buffer.getvalue())
    print_json({"title": text, "nested": [text]})
    printed = capsys.readouterr().out
    assert not CONTROLS.search(printed), repr(printed)
    assert json.loads(printed)["title"] == text  # the same document, escaped


@pytest.mark.parametrize("text", HOSTILE)
def test_log_lines_on_stderr_carry_no_control_characters(text: str) -> None:
    record = logging.LogRecord(
        "opencomposer.x", logging.WARNING, __file__, 1, "tool failed: %s", (text,), None
    )
    record.command = text
    line = HumanFormatter().format(record)
    assert not CONTROLS.search(line), repr(line)
