"""How an LSP client launches the server and reads its log: `--stdio` (what clients such as
vscode-languageclient append) serves, other transports are refused in one clear line, and once
the editor has initialized, log lines below ERROR reach it as `window/logMessage` at their
level while stderr, which clients show as errors, keeps only errors."""

import os
import subprocess
from pathlib import Path

import pytest
from support.raw_lsp import CLI, NO_MODEL, WAIT, RawClient

WARNING, INFO = 2, 3


def launch(home: Path, stderr: Path, *flags: str) -> tuple[subprocess.Popen[bytes], RawClient]:
    with stderr.open("wb") as log:
        process = subprocess.Popen(
            [str(CLI), "lsp", *flags, *NO_MODEL],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
        )
    assert process.stdin is not None and process.stdout is not None
    return process, RawClient(process.stdout, process.stdin)


def test_stdio_is_served_and_logs_reach_the_editor_at_their_level(
    tmp_path: Path, home: Path, project: Path
) -> None:
    process, client = launch(home, tmp_path / "stderr.log", "--stdio")
    try:
        assert "result" in client.initialize(project, clientInfo={"name": "Some Editor"})
        # What is serving whom, in the editor's log at INFO.
        started = client.logged.get(timeout=WAIT)
        assert started["type"] == INFO
        assert "serving Some Editor" in started["message"] and str(project) in started["message"]
        # A well-framed body that is not JSON: answered -32700, and the server logs a warning.
        client.send_body(b"{not json")
        assert client.receive()["error"]["code"] == -32700
        logged = client.logged.get(timeout=WAIT)
        assert logged["type"] == WARNING and "LSP error" in logged["message"]
        assert client.request("shutdown")["result"] is None
        client.notify("exit")
        assert process.wait(WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
        client.stop_reading()
    stderr = (tmp_path / "stderr.log").read_text()
    assert " WARNING " not in stderr and " INFO " not in stderr, stderr


@pytest.mark.parametrize("flag", ["--node-ipc", "--socket=5007", "--pipe=/tmp/lsp.sock"])
def test_other_transports_are_refused_in_one_line(home: Path, flag: str) -> None:
    done = subprocess.run(
        [str(CLI), "lsp", flag],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "stdio" in lines[0] and flag.split("=")[0] in lines[0]
    assert done.stdout == ""


def test_stdio_and_tcp_together_are_refused(home: Path) -> None:
    done = subprocess.run(
        [str(CLI), "lsp", "--stdio", "--tcp", "0"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "OPENCOMPOSER_HOME": str(home)},
    )
    assert done.returncode == 2 and "one of them" in done.stderr
