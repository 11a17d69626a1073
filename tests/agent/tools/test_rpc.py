"""The harness behind a process boundary answers exactly as the in-process one does, and a
server that dies, talks nonsense or stops answering is a typed error, never a hang."""

import asyncio
import json
import sys
from pathlib import Path

import pytest

from opencomposer.agent.tools.errors import NotFound, ToolError
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.harness_protocol import (
    CallOutcome,
    EditState,
    Harness,
    HarnessUnavailable,
    PreparedCall,
)
from opencomposer.agent.tools.rpc import RemoteHarness
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings
from opencomposer.redact import Redactor

CALLS = [
    ("read_file", {"path": "src/a.py"}),
    ("grep", {"pattern": "def"}),
    ("glob", {"pattern": "*.py"}),
    ("read_file", {"path": "../outside"}),
    ("write_file", {"path": "src/b.py", "content": "B = 2\n"}),
    ("read_file", {"path": "src/b.py", "offset": 1, "limit": 1}),
    ("todo_write", {"todos": [{"content": "ship", "status": "in_progress"}]}),
    ("nope", {}),
    ("grep", "not json"),
]


async def call(harness: Harness, name: str, arguments: dict | str) -> CallOutcome:
    """What the runtime does with a call the approval gate lets through."""
    try:
        prepared = await harness.prepare(name, arguments)
    except ToolError as error:
        return harness.failure("call_1", name, error)
    return await harness.run(prepared, call_id="call_1", turn_id="turn_1")


def comparable(outcome: CallOutcome) -> dict:
    data = outcome.to_json()
    data.pop("duration_ms")
    return data


def make_tree(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src/a.py").write_text("def a():\n    return 1\n")


async def test_remote_and_local_outcomes_are_identical(tmp_path: Path):
    local_root, remote_root = tmp_path / "ws-alpha", tmp_path / "ws-beta"
    make_tree(local_root)
    make_tree(remote_root)
    local = ToolHarness(Workspace(local_root), ToolSettings(), tmp_path / "data-alpha")
    remote = await RemoteHarness.start(remote_root, tmp_path / "data-beta", ToolSettings())
    try:
        assert remote.specs() == local.specs()
        for name, args in CALLS:
            here, there = await call(local, name, args), await call(remote, name, args)
            expected = json.loads(json.dumps(comparable(here)).replace("ws-alpha", "ws-beta"))
            assert comparable(there) == expected, name
        assert await remote.edit_states("turn_1") == [EditState("src/b.py", "kept")]
        undone = await remote.undo("turn", "turn_1")
        assert [change.path for change in undone.restored] == ["src/b.py"]
        assert not (remote_root / "src/b.py").exists()
        assert await remote.git_summary() is None  # not a repository
    finally:
        await remote.close()
        await local.close()


async def test_a_prepared_call_runs_once_and_an_unknown_one_not_at_all(tmp_path: Path):
    make_tree(tmp_path / "w")
    remote = await RemoteHarness.start(tmp_path / "w", tmp_path / "d", ToolSettings())
    try:
        prepared = await remote.prepare("read_file", {"path": "src/a.py"})
        assert (prepared.tool, prepared.view, prepared.view_fields) == (
            "read_file",
            "file_read",
            {"path": "src/a.py"},
        )
        assert (await remote.run(prepared, call_id="c1")).ok
        again = await remote.run(prepared, call_id="c2")
        forged = PreparedCall.from_json({**prepared.to_json(), "id": "prep_forged"})
        unknown = await remote.run(forged, call_id="c3")
        for outcome, prepared_id in ((again, prepared.id), (unknown, "prep_forged")):
            assert (outcome.ok, outcome.error and outcome.error.kind) == (False, "not_found")
            assert f"no prepared call {prepared_id}" in outcome.text
        with pytest.raises(NotFound, match="no tool named 'nope'"):
            await remote.prepare("nope", {})
    finally:
        await remote.close()


async def test_the_remote_secret_files_reach_the_local_redactor(tmp_path: Path):
    make_tree(tmp_path / "w")
    (tmp_path / "w/.env").write_text("API_TOKEN=s3cr3t-remote-value-42\n")
    redactor = Redactor()
    remote = await RemoteHarness.start(
        tmp_path / "w", tmp_path / "d", ToolSettings(), redactor=redactor
    )
    try:
        assert redactor.redact("x s3cr3t-remote-value-42") == "x [REDACTED]"  # with hello
        (tmp_path / "w/.env").write_text("API_TOKEN=another-one-written-later\n")
        await remote.refresh_secrets()
        assert redactor.redact("another-one-written-later") == "[REDACTED]"
        remote.secret_files.note_call({"path": ".env", "content": "KEY=about-to-be-written"})
        assert redactor.redact("about-to-be-written") == "[REDACTED]"
    finally:
        await remote.close()


async def test_a_server_dying_mid_call_is_a_typed_error(tmp_path: Path):
    make_tree(tmp_path / "w")
    remote = await RemoteHarness.start(tmp_path / "w", tmp_path / "d", ToolSettings())
    prepared = await remote.prepare("run_terminal", {"command": "sleep 30"})
    running = asyncio.create_task(remote.run(prepared, call_id="c1"))
    await asyncio.sleep(0.5)
    remote.process.kill()
    async with asyncio.timeout(10):
        with pytest.raises(HarnessUnavailable, match="the harness process exited"):
            await running
        with pytest.raises(HarnessUnavailable, match="exited"):
            await remote.prepare("read_file", {"path": "src/a.py"})
        await remote.close()


async def test_a_cancelled_call_kills_its_command_in_the_server(tmp_path: Path):
    """An interrupted turn cancels its call: the server stops the command, as in process."""
    make_tree(tmp_path / "w")
    remote = await RemoteHarness.start(tmp_path / "w", tmp_path / "d", ToolSettings())
    try:
        prepared = await remote.prepare("run_terminal", {"command": "sleep 30"})
        running = asyncio.create_task(remote.run(prepared, call_id="c1"))
        await asyncio.sleep(0.5)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        outcome = await call(remote, "terminal_output", {"job_id": "job-1"})
        assert outcome.error is not None and outcome.error.kind == "not_found"
    finally:
        await remote.close()


async def fake_server(script: str, tmp_path: Path, **options) -> RemoteHarness:
    """A RemoteHarness over a process that misbehaves as `script` says."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    return RemoteHarness(process, tmp_path, ToolSettings(), Redactor(), **options)


async def test_a_malformed_answer_line_is_a_typed_error(tmp_path: Path):
    remote = await fake_server(
        'import sys; sys.stdin.readline(); print(\'{"id": 1, "result\', flush=True); '
        "sys.stdin.read()",
        tmp_path,
    )
    async with asyncio.timeout(10):
        with pytest.raises(HarnessUnavailable, match="malformed line"):
            await remote.prepare("read_file", {"path": "a"})
        with pytest.raises(HarnessUnavailable, match="malformed line"):
            await remote.git_summary()
        await remote.close()
    assert remote.process.returncode is not None


async def test_a_server_that_stops_answering_times_out(tmp_path: Path):
    remote = await fake_server("import sys; sys.stdin.read()", tmp_path, timeout=0.5)
    async with asyncio.timeout(10):
        with pytest.raises(HarnessUnavailable, match=r"did not answer undo within 0\.5 s"):
            await remote.undo("turn", "t")
        await remote.close()


async def test_malformed_requests_get_error_answers(tmp_path: Path):
    make_tree(tmp_path / "w")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "opencomposer.agent.tools.rpc",
        "--workspace",
        str(tmp_path / "w"),
        "--data-dir",
        str(tmp_path / "d"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    requests = (
        b'garbage\n[1, 2]\n{"id": 7, "method": "call", "params": {}}\n{"id": 8}\n'
        b'{"id": 9, "method": "prepare", "params": {}}\n{"id": [1], "method": "hello"}\n'
    )
    out, _ = await asyncio.wait_for(proc.communicate(requests), 30)
    answers = [json.loads(line) for line in out.splitlines()]
    for answer in answers:
        answer.pop("secrets", None)  # whatever this machine's environment had to mask
    answers.sort(key=lambda a: a["id"] or 0)  # calls answer as they finish
    invalid = {
        "kind": "invalid_request",
        "message": "a request is an object with a string `method` and an id that is a "
        "number or a string",
    }
    assert answers == [
        {
            "id": None,
            "error": {
                "kind": "parse_error",
                "message": "Expecting value: line 1 column 1 (char 0)",
            },
        },
        {"id": None, "error": invalid},
        {"id": None, "error": invalid},
        {"id": 7, "error": {"kind": "invalid_request", "message": "unknown method 'call'"}},
        {"id": 8, "error": invalid},
        {"id": 9, "error": {"kind": "invalid_request", "message": "missing parameter 'name'"}},
    ]
    assert proc.returncode == 0
