"""`opencomposer tools` and `opencomposer tool` as a user runs them."""

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).parent / "opencomposer")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [CLI, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "Traceback" not in proc.stderr
    return proc


def test_tools_lists_names_and_schemas():
    specs = json.loads(run("tools", "--json").stdout)
    by_name = {s["function"]["name"]: s["function"] for s in specs}
    assert {
        "grep",
        "glob",
        "read_file",
        "write_file",
        "delete_file",
        "move_file",
        "todo_write",
    } <= set(by_name)
    grep = by_name["grep"]["parameters"]
    assert grep["required"] == ["pattern"]
    assert grep["properties"]["max_results"]["description"] == "Most matching lines to return."
    assert "additionalProperties" in grep and grep["additionalProperties"] is False
    table = run("tools").stdout
    assert "read_file" in table and "path, offset?, limit?" in table


def test_tool_runs_one_call_and_prints_json(tmp_path: Path):
    (tmp_path / "hello.txt").write_text("hi there\n")
    proc = run("tool", "read_file", "-w", str(tmp_path), "--args", '{"path": "hello.txt"}')
    assert proc.returncode == 0
    result = json.loads(proc.stdout)
    assert (result["ok"], result["text"], result["view"]) == (True, "     1\thi there", "file_read")


def test_tool_error_exits_2_with_the_typed_error(tmp_path: Path):
    proc = run("tool", "read_file", "-w", str(tmp_path), "--args", '{"path": "../x"}')
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["kind"] == "denied"
    bad_json = run("tool", "grep", "-w", str(tmp_path), "--args", "{oops")
    assert bad_json.returncode == 2
    assert json.loads(bad_json.stdout)["error"]["kind"] == "invalid_arguments"


def test_tool_uses_the_current_folder_by_default(tmp_path: Path):
    (tmp_path / "x.py").write_text("X = 1\n")
    proc = run("tool", "glob", "--args", '{"pattern": "*.py"}', cwd=tmp_path)
    assert json.loads(proc.stdout)["text"] == "x.py (6 B)"
