"""The harness behind a process boundary answers exactly as the in-process one does."""

import asyncio
import json
import sys
from pathlib import Path

from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.rpc import RemoteHarness
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings

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


def comparable(outcome) -> dict:
    data = outcome.to_json()
    data.pop("call_id")
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
        assert await remote.specs() == local.specs()
        for name, args in CALLS:
            here, there = await local.call(name, args), await remote.call(name, args)
            expected = json.loads(json.dumps(comparable(here)).replace("ws-alpha", "ws-beta"))
            assert comparable(there) == expected, name
    finally:
        await remote.close()
        await local.close()


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
    requests = b'garbage\n[1, 2]\n{"id": 7, "method": "call", "params": {}}\n{"id": 8}\n'
    out, _ = await asyncio.wait_for(proc.communicate(requests), 30)
    answers = sorted(
        (json.loads(line) for line in out.splitlines()), key=lambda a: a["id"] or 0
    )  # calls answer as they finish
    assert answers == [
        {
            "id": None,
            "error": {
                "kind": "parse_error",
                "message": "Expecting value: line 1 column 1 (char 0)",
            },
        },
        {
            "id": None,
            "error": {
                "kind": "invalid_request",
                "message": "a request is an object with a string `method`",
            },
        },
        {"id": 7, "error": {"kind": "invalid_request", "message": "missing parameter 'name'"}},
        {
            "id": 8,
            "error": {
                "kind": "invalid_request",
                "message": "a request is an object with a string `method`",
            },
        },
    ]
    assert proc.returncode == 0
