"""run_terminal and its job tools through the harness."""

from pathlib import Path

import pytest

from opencomposer.agent.protocol.common import ActionClass
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings


async def test_run_reports_output_and_exit_code(harness, root: Path):
    outcome = await harness.call("run_terminal", {"command": "echo hi; echo err >&2; exit 3"})
    assert outcome.ok
    assert outcome.text.endswith("[exit code 3]")
    assert "hi" in outcome.text and "err" in outcome.text
    assert outcome.view == "command_execution"
    assert outcome.fields["command"] == "echo hi; echo err >&2; exit 3"
    assert outcome.fields["exit_code"] == 3 and outcome.fields["sandbox"] == harness.sandbox.name


async def test_soft_timeout_leaves_a_job_to_read_and_kill(harness):
    started = await harness.call(
        "run_terminal", {"command": "echo start; sleep 30", "timeout": 0.5}
    )
    job = started.data["job_id"]
    assert started.fields["timed_out"] and started.fields["background_id"] == job
    assert f"still running as job {job}" in started.text
    more = await harness.call("terminal_output", {"job_id": job})
    assert more.data["running"]
    killed = await harness.call("terminal_kill", {"job_id": job})
    assert not killed.data["running"] and "killed by signal" in killed.text
    unknown = await harness.call("terminal_output", {"job_id": "nope"})
    assert unknown.error.kind == "not_found"


async def test_background_job_takes_input(harness):
    started = await harness.call(
        "run_terminal",
        {
            "command": "python3 -u -c \"import sys\nfor l in sys.stdin: print('got', l.strip())\"",
            "background": True,
        },
    )
    job = started.data["job_id"]
    answer = await harness.call("terminal_input", {"job_id": job, "text": "ping\n"})
    if "got ping" not in answer.text:
        answer = await harness.call("terminal_output", {"job_id": job, "wait": 2})
    assert "got ping" in answer.text
    await harness.call("terminal_kill", {"job_id": job})


async def test_commands_are_classified_for_approval(harness):
    async def klass(command: str) -> ActionClass:
        return (await harness.prepare("run_terminal", {"command": command})).action_class

    assert await klass("ls -la") == ActionClass.read_only
    assert await klass("pytest -q") == ActionClass.writes_workspace
    assert await klass("curl https://example.com") == ActionClass.network
    assert await klass("bash -c 'rm -rf /'") == ActionClass.dangerous
    assert (await harness.prepare("run_terminal", {"command": "ls"})).summary == "ls"


async def test_writes_outside_the_workspace_fail_in_the_sandbox(harness, root: Path, tmp_path):
    if harness.sandbox.name != "bubblewrap":
        pytest.skip("the fallback cannot isolate the file system (doctor says so)")
    system = Path("/etc/opencomposer-sandbox-test")
    outcome = await harness.call("run_terminal", {"command": f"echo x > {system}"})
    assert "Read-only file system" in outcome.text and "[exit code 1]" in outcome.text
    assert not system.exists()
    private = tmp_path / "outside.txt"  # /tmp inside the sandbox is its own
    await harness.call("run_terminal", {"command": f"echo x > {private}"})
    assert not private.exists()
    inside = await harness.call("run_terminal", {"command": "echo x > inside.txt"})
    assert "[exit code 0]" in inside.text and (root / "inside.txt").read_text() == "x\n"


async def test_a_command_is_told_about_unsaved_editor_buffers(root: Path, tmp_path: Path):
    (root / "app.py").write_text("x = 1\n")
    buffers = {root / "app.py": "x = 2\n"}
    tools = ToolHarness(Workspace(root, overlay=buffers), ToolSettings(), tmp_path / "data")
    try:
        unsaved = await tools.call("run_terminal", {"command": "cat app.py"})
        buffers[root / "app.py"] = "x = 1\n"  # saved: the buffer matches the disk again
        saved = await tools.call("run_terminal", {"command": "cat app.py"})
    finally:
        await tools.close()
    assert "x = 1" in unsaved.text
    assert unsaved.text.endswith("unsaved changes in app.py]")
    assert "unsaved" not in saved.text
