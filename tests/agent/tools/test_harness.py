"""The harness: typed failures instead of crashes, capped output, checkpoints and undo."""

import errno
from pathlib import Path

import pytest

from opencomposer.agent.protocol.common import ActionClass
from opencomposer.agent.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from opencomposer.agent.tools.beneath import Tree
from opencomposer.agent.tools.errors import Conflict
from opencomposer.agent.tools.harness import ToolHarness, cap_text
from opencomposer.agent.tools.workspace import DiskWriter, Workspace
from opencomposer.config import ToolSettings
from opencomposer.redact import Redactor


class Broken(Tool):
    name = "broken"
    description = "Always fails with a bug."
    Args = ToolArgs

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        raise ZeroDivisionError("division by zero")


class Loud(Tool):
    name = "loud"
    description = "Prints a lot, and a secret."
    Args = ToolArgs

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(text="token=sk-abcdefghijklmnopqrstuvwxyz123456 " + "x" * 5_000)


async def test_arguments_are_validated_with_readable_errors(harness):
    missing = await harness.call("read_file", {})
    assert missing.error.kind == "invalid_arguments"
    assert missing.text == (
        "Error (invalid_arguments): read_file: path: Field required\n"
        "read_file takes: path, offset, limit."
    )
    typo = await harness.call("read_file", {"path": "a", "ofset": 3})
    assert "ofset: Extra inputs are not permitted" in typo.text
    not_json = await harness.call("grep", '{"pattern": ')
    assert "arguments are not valid JSON" in not_json.text
    as_string = await harness.call("glob", '{"pattern": "*.nothing"}')
    assert as_string.ok
    unknown = await harness.call("rm_rf", {})
    assert unknown.error.kind == "not_found" and "Available tools: grep" in unknown.text


async def test_a_bug_in_a_tool_is_an_outcome_not_a_crash(root: Path, tmp_path: Path):
    harness = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data", tools=[Broken()])
    outcome = await harness.call("broken", {})
    assert (outcome.ok, outcome.error.kind) == (False, "unexpected_environment")
    assert "division by zero" in outcome.text


async def test_output_is_redacted_and_capped(root: Path, tmp_path: Path):
    settings = ToolSettings(output_cap=1_000)
    harness = ToolHarness(
        Workspace(root), settings, tmp_path / "data", tools=[Loud()], redactor=Redactor()
    )
    outcome = await harness.call("loud", {})
    assert "sk-abcdef" not in outcome.text and "[REDACTED]" in outcome.text
    assert len(outcome.text) < 1_100 and "characters omitted" in outcome.text


def test_cap_text_keeps_head_and_tail():
    assert cap_text("short", 100) == "short"
    capped = cap_text("a" * 600 + "z" * 600, 300)
    assert capped.startswith("a" * 200) and capped.endswith("z" * 100)
    assert "[... 900 characters omitted ...]" in capped


async def test_prepare_classifies_before_running(harness):
    read = await harness.prepare("read_file", {"path": "x"})
    write = await harness.prepare("write_file", {"path": "x", "content": "y"})
    assert (read.action_class, write.action_class) == (
        ActionClass.read_only,
        ActionClass.writes_workspace,
    )
    assert read.summary == 'read_file {"path": "x"}'  # the default: the call itself
    assert write.summary == "write x (1 line)"
    edit = await harness.prepare(
        "edit_file", {"path": "a.py", "old_string": "x = 1\ny = 2", "new_string": "x = 3"}
    )
    assert edit.summary == "edit a.py: 'x = 1' (+1 lines) -> 'x = 3'"
    patch = await harness.prepare(
        "apply_patch",
        {
            "patch": "*** Begin Patch\n*** Update File: a.py\n"
            "@@\n-x\n+y\n*** Delete File: b.py\n"
            "*** End Patch\n"
        },
    )
    assert patch.summary == "apply patch: update a.py, delete b.py"


async def write(harness, path: str, content: str, turn: str, call: str) -> None:
    outcome = await harness.call(
        "write_file",
        {"path": path, "content": content, "overwrite": True},
        call_id=call,
        turn_id=turn,
    )
    assert outcome.ok, outcome.text


async def test_undo_the_last_edit_then_a_turn_then_the_thread(harness, root: Path):
    (root / "keep.txt").write_bytes(b"original\r\n")
    await write(harness, "keep.txt", "turn 1\n", "t1", "c1")
    await write(harness, "new.txt", "made in turn 1\n", "t1", "c2")
    await write(harness, "keep.txt", "turn 2, call 3\n", "t2", "c3")
    await write(harness, "keep.txt", "turn 2, call 4\n", "t2", "c4")

    last = await harness.undo("edit")
    assert [c.path for c in last.restored] == ["keep.txt"]
    assert (root / "keep.txt").read_bytes() == b"turn 2, call 3\r\n"

    turn = await harness.undo("turn")
    assert [c.path for c in turn.restored] == ["keep.txt"]
    assert (root / "keep.txt").read_bytes() == b"turn 1\r\n"

    thread = await harness.undo("thread")
    assert sorted(c.path for c in thread.restored) == ["keep.txt", "new.txt"]
    assert (root / "keep.txt").read_bytes() == b"original\r\n"
    assert not (root / "new.txt").exists()
    assert (await harness.undo("thread")).restored == []


async def test_undo_leaves_files_changed_since_alone(harness, root: Path):
    await write(harness, "a.txt", "agent\n", "t1", "c1")
    await write(harness, "b.txt", "agent\n", "t1", "c1")
    (root / "a.txt").write_text("the user edited this\n")
    outcome = await harness.undo("turn")
    assert outcome.conflicts == ["a.txt"] and [c.path for c in outcome.restored] == ["b.txt"]
    assert (root / "a.txt").read_text() == "the user edited this\n"
    with pytest.raises(Conflict, match=r"nothing undone: a\.txt changed"):
        await harness.undo("turn")


async def test_undo_of_a_move_puts_the_file_back(harness, root: Path):
    (root / "a.txt").write_text("A\n")
    await harness.call("move_file", {"path": "a.txt", "new_path": "b/a.txt"})
    await harness.undo("edit")
    assert (root / "a.txt").read_text() == "A\n" and not (root / "b/a.txt").exists()


async def test_checkpoints_survive_a_new_harness(root: Path, tmp_path: Path):
    first = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data", thread_id="t")
    await write(first, "f.txt", "one\n", "t1", "c1")
    await first.close()
    second = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data", thread_id="t")
    await second.undo("edit")
    assert not (root / "f.txt").exists()
    await second.close()


class DiskFullOnSecondWrite(DiskWriter):
    """Writes to disk, but the second write of a call fails as a full disk would."""

    def __init__(self, root: Path) -> None:
        super().__init__(Tree(root))
        self.writes = 0

    async def write(self, path: Path, data: bytes) -> None:
        self.writes += 1
        if self.writes == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        await super().write(path, data)


async def test_a_failing_write_rolls_back_the_calls_earlier_writes(root: Path, tmp_path: Path):
    (root / "a.txt").write_text("A\n")
    (root / "b.txt").write_text("B\n")
    harness = ToolHarness(
        Workspace(root, writer=DiskFullOnSecondWrite(root)), ToolSettings(), tmp_path / "data"
    )
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-A\n+A2\n"
        "*** Update File: b.txt\n@@\n-B\n+B2\n*** End Patch\n"
    )
    outcome = await harness.call("apply_patch", {"patch": patch})
    assert outcome.error.kind == "unexpected_environment"
    assert outcome.text == (
        "Error (unexpected_environment): writing b.txt failed (No space left "
        "on device); 1 earlier change(s) of this call were rolled back"
    )
    assert ((root / "a.txt").read_text(), (root / "b.txt").read_text()) == ("A\n", "B\n")
    await harness.close()
