"""Path resolution that cannot be raced (issue 13, finding 2), and the static ways out.

A racer process (tests/support/path_racer.py) keeps swapping `ws/sub`, or the file a tool
uses in it, for a symlink to a folder outside the workspace whose files hold a canary,
while every tool that opens a path is called over and over. Whatever the race does, the
canary must never show in a result nor be copied into the workspace, and the outside folder
must end exactly as it began: nothing written, deleted, moved or created there. grep, glob
and the indexes' listing run ripgrep inside the sandbox, where the outside folder (under the
private /tmp) does not exist, so those cases need bubblewrap.
"""

import asyncio
import contextlib
import os
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.sandbox import probe_bubblewrap
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings

RACER = Path(__file__).parents[1] / "support" / "path_racer.py"
# Each tool is called until it has run this many rounds or for this long, whichever comes
# first: the cheap tools reach the count (1-5 ms a call on 2 busy cores), the ones that start
# ripgrep in bubblewrap (50 ms a call) the time. The old code leaked within 100-600 rounds;
# 33 tool/variant pairs at these bounds cost under 2 minutes of CI.
ROUNDS = 2000
SECONDS = 3.0
CALL_TIMEOUT = 30.0


@dataclass
class Scene:
    root: Path
    outside: Path
    token: str
    """The canary: in every outside file, never in a result or a workspace file."""

    function: str
    """A canary function name, defined in the outside f.py."""

    lonely: str
    """A file name only the outside folder has."""

    harness: ToolHarness

    def outside_files(self) -> dict[str, tuple[bytes, int]]:
        return {
            str(p.relative_to(self.outside)): (p.read_bytes(), p.stat().st_mode)
            for p in sorted(self.outside.rglob("*"))
            if p.is_file()
        } | {
            str(p.relative_to(self.outside)): (b"<dir>", 0)
            for p in self.outside.rglob("*")
            if p.is_dir()
        }

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        outcome = await asyncio.wait_for(self.harness.call(tool, args), CALL_TIMEOUT)
        return outcome.to_json()


@pytest.fixture
async def scene(tmp_path: Path):
    root, outside = tmp_path / "ws", tmp_path / "outside"
    hexa = uuid.uuid4().hex
    token, function, lonely = f"CANARY-{hexa}", f"canary_{hexa}", f"only-outside-{hexa}.txt"
    for folder in (root / "sub", root / "top", outside):
        folder.mkdir(parents=True)
    # The outside folder mirrors sub's names, so that anything a race redirects lands on one.
    for name in ("f.txt", "del.txt", "m.txt", lonely):
        (outside / name).write_text(f"inside\n{token}\n")
    (outside / "f.py").write_text(f"def {function}():\n    return '{token}'\n")
    (root / "sub/f.txt").write_text("inside\n")
    (root / "sub/f.py").write_text("def inside():\n    return 1\n")
    harness = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data")
    yield Scene(root, outside, token, function, lonely, harness)
    await harness.close()


@dataclass
class Race:
    swaps: int = 0


@contextlib.contextmanager
def racing(mode: str, path: Path, target: Path) -> Iterator[Race]:
    racer = subprocess.Popen(
        [sys.executable, str(RACER), mode, str(path), str(target), str(SECONDS * 3)],
        stdout=subprocess.PIPE,
        text=True,
    )
    race = Race()
    try:
        assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        yield race
    finally:
        racer.terminate()
        out, _ = racer.communicate(timeout=30)
        race.swaps = int(out.split()[-1])


# --------------------------------------------------------------------------- the rounds


async def read_file(s: Scene, i: int) -> list[dict]:
    return [await s.call("read_file", {"path": "sub/f.txt"})]


async def write_file(s: Scene, i: int) -> list[dict]:
    return [
        await s.call(
            "write_file", {"path": "sub/f.txt", "content": f"inside\n{i}\n", "overwrite": True}
        ),
        await s.call("write_file", {"path": "sub/new.txt", "content": "x\n", "overwrite": True}),
    ]


async def edit_file(s: Scene, i: int) -> list[dict]:
    # One of the two applies; the other fails, showing the closest lines of what it read.
    return [
        await s.call("edit_file", {"path": "sub/f.txt", "old_string": old, "new_string": new})
        for old, new in (("inside", "INSIDE"), ("INSIDE", "inside"))
    ]


async def apply_patch(s: Scene, i: int) -> list[dict]:
    def update(old: str, new: str) -> str:
        return f"*** Begin Patch\n*** Update File: sub/f.txt\n@@\n-{old}\n+{new}\n*** End Patch"

    add = "*** Begin Patch\n*** Add File: sub/added.txt\n+x\n*** End Patch"
    delete = "*** Begin Patch\n*** Delete File: sub/added.txt\n*** End Patch"
    return [
        await s.call("apply_patch", {"patch": patch})
        for patch in (update("inside", "INSIDE"), update("INSIDE", "inside"), add, delete)
    ]


async def delete_file(s: Scene, i: int) -> list[dict]:
    return [
        await s.call("write_file", {"path": "sub/del.txt", "content": "x\n", "overwrite": True}),
        await s.call("delete_file", {"path": "sub/del.txt"}),
    ]


async def move_file_source(s: Scene, i: int) -> list[dict]:
    return [
        await s.call("write_file", {"path": "sub/m.txt", "content": "x\n", "overwrite": True}),
        await s.call("move_file", {"path": "sub/m.txt", "new_path": "top/m.txt"}),
        await s.call("delete_file", {"path": "top/m.txt"}),
    ]


async def move_file_target(s: Scene, i: int) -> list[dict]:
    return [
        await s.call("write_file", {"path": "top/t.txt", "content": "x\n", "overwrite": True}),
        await s.call("move_file", {"path": "top/t.txt", "new_path": "sub/t.txt"}),
        await s.call("delete_file", {"path": "sub/t.txt"}),
    ]


async def grep(s: Scene, i: int) -> list[dict]:
    return [
        await s.call("grep", {"pattern": "CANARY", "path": "sub/f.txt"}),
        await s.call("grep", {"pattern": "CANARY", "path": "sub"}),
        await s.call("grep", {"pattern": "CANARY"}),
    ]


async def glob(s: Scene, i: int) -> list[dict]:
    return [
        await s.call("glob", {"pattern": "*", "path": "sub"}),
        await s.call("glob", {"pattern": "*"}),
    ]


async def outline(s: Scene, i: int) -> list[dict]:
    return [await s.call("symbols", {"path": "sub/f.py"})]


async def indexes(s: Scene, i: int) -> list[dict]:
    return [
        await s.call("symbols", {"query": "canary"}),
        await s.call("semantic_search", {"query": "canary return", "path": "sub"}),
    ]


@dataclass(frozen=True)
class Tool:
    play: Callable[[Scene, int], Any]
    file: str
    """The file in sub it opens, swapped in the `exchange file` variant."""

    ripgrep: bool = False
    """It starts ripgrep, which only the bubblewrap sandbox confines."""

    names_file: bool = True
    """It is given the file's path, so a swapped file is refused; the listing tools only
    find it, and skip what they cannot open."""

    warm_up: bool = False
    """Play a round before the race starts (building the indexes takes seconds)."""


TOOLS = {
    "read_file": Tool(read_file, "f.txt"),
    "write_file": Tool(write_file, "f.txt"),
    "edit_file": Tool(edit_file, "f.txt"),
    "apply_patch": Tool(apply_patch, "f.txt"),
    "delete_file": Tool(delete_file, "del.txt"),
    "move_file source": Tool(move_file_source, "m.txt"),
    "move_file target": Tool(move_file_target, "t.txt"),
    "grep": Tool(grep, "f.txt", ripgrep=True),
    "glob": Tool(glob, "f.txt", ripgrep=True, names_file=False),
    "symbols outline": Tool(outline, "f.py"),
    "symbols and semantic indexes": Tool(
        indexes, "f.py", ripgrep=True, names_file=False, warm_up=True
    ),
}
VARIANTS = ("exchange folder", "replace folder", "exchange file")


def _race_target(scene: Scene, variant: str, file: str) -> tuple[str, Path, Path]:
    if variant == "exchange folder":
        return "exchange", scene.root / "sub", scene.outside
    if variant == "replace folder":
        return "replace", scene.root / "sub", scene.outside
    return "exchange", scene.root / "sub" / file, scene.outside / file


def _leaks(scene: Scene, result: dict[str, Any]) -> bool:
    text = repr(result)
    return any(secret in text for secret in (scene.token, scene.function, scene.lonely))


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", TOOLS)
async def test_a_racing_symlink_never_leads_a_tool_outside(scene: Scene, name: str, variant: str):
    tool = TOOLS[name]
    if tool.ripgrep and not probe_bubblewrap()[0]:
        pytest.skip("ripgrep is confined by the bubblewrap sandbox, unavailable here")
    if tool.warm_up:
        await tool.play(scene, -1)
    before = scene.outside_files()
    refused = rounds = 0
    leaked: list[dict] = []
    with racing(*_race_target(scene, variant, tool.file)) as race:
        deadline = time.monotonic() + SECONDS
        while rounds < ROUNDS and time.monotonic() < deadline:
            for result in await tool.play(scene, rounds):
                refused += result["error"] is not None and result["error"]["kind"] == "denied"
                if _leaks(scene, result):
                    leaked.append(result)
            rounds += 1
    assert leaked == []
    assert scene.outside_files() == before
    in_workspace = [
        p
        for p in scene.root.rglob("*")
        if p.is_file() and not p.is_symlink() and scene.token.encode() in p.read_bytes()
    ]
    assert in_workspace == []
    # The race was real: the racer swapped, and calls met the swapped path and were refused.
    assert race.swaps >= 100
    if tool.names_file or variant != "exchange file":
        assert refused > 0, f"{rounds} rounds, {race.swaps} swaps, no call refused"


# --------------------------------------------------------------------------- static cases


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("SECRET\n")
    return folder


async def test_a_symlink_pointing_out_is_refused_for_every_use(harness, root: Path, outside: Path):
    os.symlink(outside, root / "out")
    os.symlink(outside / "secret.txt", root / "secret-link.txt")
    os.symlink(outside / "missing.txt", root / "dangling-out.txt")
    calls = [
        ("read_file", {"path": "out/secret.txt"}),
        ("read_file", {"path": "secret-link.txt"}),
        ("write_file", {"path": "out/new.txt", "content": "x"}),
        ("write_file", {"path": "dangling-out.txt", "content": "x"}),
        ("edit_file", {"path": "secret-link.txt", "old_string": "SECRET", "new_string": "x"}),
        ("delete_file", {"path": "secret-link.txt"}),
        ("move_file", {"path": "secret-link.txt", "new_path": "taken.txt"}),
        ("grep", {"pattern": "SECRET", "path": "out"}),
        ("glob", {"pattern": "*", "path": "out"}),
        ("symbols", {"path": "out/secret.txt"}),
    ]
    for tool, args in calls:
        outcome = await harness.call(tool, args)
        assert outcome.error is not None and outcome.error.kind == "denied", (tool, args)
        assert "SECRET" not in outcome.text.replace("'SECRET'", "")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "SECRET\n"


async def test_symlinks_inside_the_workspace_work(harness, root: Path):
    (root / "real").mkdir()
    (root / "real/a.txt").write_text("alpha\n")
    os.symlink(root / "real", root / "alias")
    os.symlink("real/a.txt", root / "a-link.txt")
    os.symlink("real/later.txt", root / "dangling-in.txt")
    read = await harness.call("read_file", {"path": "alias/a.txt"})
    assert read.ok and "alpha" in read.text and read.fields["path"] == "real/a.txt"
    edit = await harness.call(
        "edit_file", {"path": "a-link.txt", "old_string": "alpha", "new_string": "beta"}
    )
    assert edit.ok, edit.text
    assert (root / "real/a.txt").read_text() == "beta\n" and (root / "a-link.txt").is_symlink()
    missing = await harness.call("read_file", {"path": "dangling-in.txt"})
    assert missing.error.kind == "not_found"
    # A dangling link names its target: writing it creates the file it points to.
    created = await harness.call("write_file", {"path": "dangling-in.txt", "content": "new\n"})
    assert created.ok and (root / "real/later.txt").read_text() == "new\n"


async def test_a_loop_of_symlinks_is_a_clear_error(harness, root: Path):
    os.symlink("b", root / "a")
    os.symlink("a", root / "b")
    outcome = await harness.call("read_file", {"path": "a/x.txt"})
    assert outcome.text == ("Error (invalid_arguments): a/x.txt: its symbolic links form a loop")


@pytest.mark.parametrize(
    "path",
    [
        "sub/../../outside/secret.txt",
        "../outside/secret.txt",
        "sub/../sub/../../outside",
        "./sub/./../..",
        "/etc/passwd",
    ],
)
async def test_dot_dot_chains_cannot_climb_out(harness, root: Path, outside: Path, path: str):
    (root / "sub").mkdir()
    for tool, args in (
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "x", "overwrite": True}),
        ("grep", {"pattern": "SECRET", "path": path}),
    ):
        outcome = await harness.call(tool, args)
        assert outcome.error.kind == "denied", (tool, outcome.text)
    assert (outside / "secret.txt").read_text() == "SECRET\n"


async def test_dot_dot_that_stays_inside_works(harness, root: Path):
    (root / "sub").mkdir()
    (root / "sub/a.txt").write_text("alpha\n")
    outcome = await harness.call("read_file", {"path": "sub/../sub/./a.txt"})
    assert outcome.ok and outcome.fields["path"] == "sub/a.txt"


async def test_a_hard_link_is_read_as_the_file_it_names_and_written_as_a_new_one(
    harness, root: Path, outside: Path
):
    """The decision for hard links (beneath.py): one is another name of the same file, so
    reading it reads that file: confinement is of paths, and the sandbox cannot make such a
    link (the workspace is its own mount). Changing one replaces the workspace's name only."""
    os.link(outside / "secret.txt", root / "hard.txt")
    read = await harness.call("read_file", {"path": "hard.txt"})
    assert read.ok and "SECRET" in read.text
    write = await harness.call(
        "write_file", {"path": "hard.txt", "content": "mine\n", "overwrite": True}
    )
    assert write.ok, write.text
    assert (root / "hard.txt").read_text() == "mine\n"
    assert (outside / "secret.txt").read_text() == "SECRET\n"
    os.link(outside / "secret.txt", root / "hard2.txt")
    assert (await harness.call("delete_file", {"path": "hard2.txt"})).ok
    assert (outside / "secret.txt").read_text() == "SECRET\n"


async def test_a_fifo_is_refused_without_blocking(harness, root: Path):
    os.mkfifo(root / "pipe")
    (root / "a.txt").write_text("needle\n")
    for tool, args in (
        ("read_file", {"path": "pipe"}),
        ("grep", {"pattern": "needle", "path": "pipe"}),
        ("symbols", {"path": "pipe"}),
        ("edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"}),
    ):
        outcome = await asyncio.wait_for(harness.call(tool, args), CALL_TIMEOUT)
        assert not outcome.ok, (tool, outcome.text)
        assert outcome.error.kind in ("invalid_arguments", "not_found"), (tool, outcome.text)
    everything = await asyncio.wait_for(harness.call("grep", {"pattern": "needle"}), CALL_TIMEOUT)
    assert everything.text == "a.txt:1:needle"


async def test_a_device_node_is_refused(harness, root: Path):
    try:
        os.mknod(root / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD")
    outcome = await harness.call("read_file", {"path": "null"})
    assert outcome.error.kind == "invalid_arguments"
    assert "not a regular file" in outcome.text


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


async def test_new_files_follow_the_umask_and_existing_ones_keep_their_mode(
    harness, root: Path, umask_027
):
    (root / "private.txt").write_text("a\n")
    (root / "private.txt").chmod(0o600)
    (root / "tool.sh").write_text("echo a\n")
    (root / "tool.sh").chmod(0o755)
    for path in ("new/dir/created.txt", "private.txt", "tool.sh"):
        outcome = await harness.call(
            "write_file", {"path": path, "content": "b\n", "overwrite": True}
        )
        assert outcome.ok, outcome.text

    def mode(path: str) -> int:
        return stat.S_IMODE((root / path).stat().st_mode)

    assert (mode("new/dir/created.txt"), mode("new/dir"), mode("private.txt"), mode("tool.sh")) == (
        0o640,
        0o750,
        0o600,
        0o755,
    )
    assert [p.name for p in root.rglob(".*.tmp")] == []
