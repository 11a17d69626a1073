"""Cheap commands must not cost the server dearly (class 4): a file's size is the command's
choice (a sparse file of gigabytes costs it four kilobytes), so no tool reads one whole into
memory, checkpoints keep images up to `tools.checkpoint_max_bytes` only, and the quarantine
never copies a file dense across file systems.

Every file is made by a real command in real bubblewrap, then met by real tool calls through
the harness. What the server allocates meanwhile is measured with tracemalloc (every bytes
object a read makes is counted), what the data folder holds with `st_blocks`.
"""

import asyncio
import hashlib
import os
import shutil
import tempfile
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from opencomposer.agent.tools.errors import Conflict
from opencomposer.agent.tools.harness import CallOutcome, ToolHarness
from opencomposer.agent.tools.terminal.set_aside import KEEP_BYTES, KEEP_ENTRIES, KEEP_FILE_BYTES
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings

pytestmark = pytest.mark.timeout(300)

T = TypeVar("T")
MiB = 1024 * 1024
# Under the sandbox's 2 GiB file size limit; the old code read all of it per call.
SPARSE = 1900 * MiB
# Far below any file read whole: the largest buffer a call here may allocate.
BOUND = 64 * MiB


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def tools(bwrap: Path, root: Path, data: Path) -> AsyncIterator[ToolHarness]:
    harness = ToolHarness(Workspace(root), ToolSettings(), data)
    assert harness.sandbox.name == "bubblewrap"
    yield harness
    await harness.close()


async def run(tools: ToolHarness, command: str) -> CallOutcome:
    outcome = await tools.call("run_terminal", {"command": command, "timeout": 120})
    assert outcome.ok and "[exit code 0]" in outcome.text, outcome.text
    return outcome


async def peak(call: Awaitable[T]) -> tuple[T, int]:
    """What `call` returns, and the most memory Python held for it at once meanwhile."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = await call
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def disk_usage(folder: Path) -> int:
    """Bytes the folder's files take on disk (holes take none)."""
    return sum(p.lstat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def note(outcome: CallOutcome) -> str:
    return outcome.text.partition("Note: ")[2]


# ---------------------------------------------------------------------- checkpoints

CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "delete": ("delete_file", {"path": "big.bin"}),
    "move": ("move_file", {"path": "big.bin", "new_path": "moved/big.bin"}),
    "overwrite": ("write_file", {"path": "big.bin", "content": "small now\n", "overwrite": True}),
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("make", ["sparse", "dense"])
async def test_a_file_over_the_limit_is_changed_without_being_read_or_kept(
    tools: ToolHarness, root: Path, data: Path, name: str, make: str
):
    """A 1.9 GB sparse file, or a 40 MB real one: the call does what it says, reads none of
    it (no buffer near its size), keeps none of it, and says that undo cannot restore it;
    undo then leaves it be."""
    size = SPARSE if make == "sparse" else 40 * MiB
    command = (
        f"truncate -s {size} big.bin"
        if make == "sparse"
        else f"head -c {size} /dev/urandom > big.bin"
    )
    await run(tools, command)
    tool, arguments = CALLS[name]
    outcome, used = await peak(tools.call(tool, arguments))
    assert outcome.ok, outcome.text
    assert used < BOUND, f"{used:,} bytes allocated for a call on a {size:,}-byte file"
    assert note(outcome).startswith("undo cannot restore big.bin (")
    assert "over the 16 MiB kept for undo)" in note(outcome)
    assert disk_usage(data / "checkpoints") < MiB
    after = {
        "delete": lambda: not (root / "big.bin").exists(),
        "move": lambda: (root / "moved/big.bin").stat().st_size == size,
        "overwrite": lambda: (root / "big.bin").read_text() == "small now\n",
    }
    assert after[name]()

    undone = await tools.undo("edit")
    assert (undone.restored, undone.unrestorable) == (
        [],
        ["big.bin"] + (["moved/big.bin"] if name == "move" else []),
    )
    assert after[name]()


async def test_text_tools_refuse_a_huge_file_without_reading_it(tools: ToolHarness):
    """edit_file and read_file stop at 128 MiB, judged before reading."""
    await run(tools, f"truncate -s {SPARSE} notes.txt")
    edit, used = await peak(
        tools.call("edit_file", {"path": "notes.txt", "old_string": "a", "new_string": "b"})
    )
    assert not edit.ok and "over the 134,217,728-byte limit" in edit.text
    assert used < BOUND
    read, used = await peak(tools.call("read_file", {"path": "notes.txt"}))
    assert not read.ok and "over the 134,217,728-byte limit" in read.text
    assert used < BOUND


async def test_undo_and_edit_outcomes_do_not_read_a_file_a_command_made_huge(
    tools: ToolHarness, root: Path
):
    """The agent writes a small file; a command then makes it 1.9 GB. Undo finds it changed
    (reading no more than the 6 bytes it expects), and so does the next turn's look at what
    became of the turn's edits."""
    written = await tools.call("write_file", {"path": "f.txt", "content": "small\n"}, turn_id="t1")
    assert written.ok
    await run(tools, f"truncate -s {SPARSE} f.txt")
    states, used = await peak(tools.edit_states("t1"))
    assert [(s.path, s.state) for s in states] == [("f.txt", "modified")]
    assert used < BOUND
    with pytest.raises(Conflict, match="changed since the agent wrote them"):
        await peak(tools.undo("edit"))
    assert (root / "f.txt").stat().st_size == SPARSE


@pytest.mark.parametrize("make", ["sparse", "dense"])
async def test_a_file_within_the_limit_is_kept_and_undo_restores_it(
    tools: ToolHarness, root: Path, make: str
):
    """Below the limit everything is as before: a sparse 8 MB file is kept (8 MB at most, the
    limit bounds it) and a real 2 MB one, and undo puts each back byte for byte."""
    command = "truncate -s 8M f.bin" if make == "sparse" else "head -c 2097152 /dev/urandom > f.bin"
    await run(tools, command)
    original = hashlib.sha256((root / "f.bin").read_bytes()).hexdigest()
    deleted = await tools.call("delete_file", {"path": "f.bin"})
    assert deleted.ok and "undo cannot restore" not in deleted.text
    undone = await tools.undo("edit")
    assert [c.path for c in undone.restored] == ["f.bin"]
    assert hashlib.sha256((root / "f.bin").read_bytes()).hexdigest() == original


async def test_the_limit_is_a_setting(bwrap: Path, root: Path, data: Path):
    """`tools.checkpoint_max_bytes` = 1 MiB: a 2 MiB file is not kept, a 512 KiB one is."""
    harness = ToolHarness(Workspace(root), ToolSettings(checkpoint_max_bytes=MiB), data)
    try:
        await run(
            harness, "head -c 2097152 /dev/zero > two.bin && head -c 524288 /dev/zero > half.bin"
        )
        two = await harness.call("delete_file", {"path": "two.bin"})
        half = await harness.call("delete_file", {"path": "half.bin"})
        assert note(two) == "undo cannot restore two.bin (2 MiB, over the 1 MiB kept for undo)."
        assert note(half) == ""
    finally:
        await harness.close()


async def test_a_huge_or_unreadable_env_file_is_not_read(tools: ToolHarness, root: Path):
    """Secret files are re-read after every command: one made huge, or a FIFO, is skipped
    unread, nothing hangs, and the readable one beside them is still learnt (masked)."""
    secret = "s3cr3t-Value-0123456789"
    plant = (
        f"truncate -s {SPARSE} .env && mkfifo .env.local && "
        f"printf 'API_TOKEN={secret}\\n' > .env.prod"
    )
    _, used = await peak(run(tools, plant))
    assert used < BOUND
    shown = await run(tools, "cat .env.prod")
    assert secret not in shown.text and "API_TOKEN=" in shown.text
    assert (root / ".env").stat().st_size == SPARSE


@pytest.mark.parametrize("line", [2 * MiB, 20 * MiB])
async def test_grep_reads_a_bounded_part_of_what_ripgrep_prints(tools: ToolHarness, line: int):
    """ripgrep's JSON repeats every match: one line of 2 MB of `a` made over a gigabyte of
    output for the pattern `a`, all of it held by the server. Its output is read up to
    16 MiB, ripgrep stopped there, and the result says so."""
    await run(tools, f"head -c {line} /dev/zero | tr '\\0' a > line.txt && echo 'a short' > b.txt")
    outcome, used = await peak(tools.call("grep", {"pattern": "a"}))
    assert outcome.ok, outcome.text
    assert used < BOUND
    assert "[ripgrep's output passed 16,777,216 bytes (long lines) and was cut]" in outcome.text
    assert outcome.fields["match_count"] == 2


async def test_a_config_that_includes_one_file_many_times_is_not_listed_whole(
    tools: ToolHarness, root: Path
):
    """A background job gives the repository it made a config that includes a 200 KB file
    500 times: git lists 295 MB of it for the file tools' check of what git runs there. The
    listing is read up to 4 MiB; the write goes on, and the server holds no more."""
    plant = (
        "git init -q r && sleep 1 && python3 -c \"open('r/big', 'w').write('[a]\\n' + "
        "''.join('c%d = y\\n' % i for i in range(25000)))\" && "
        "printf '[include]\\n' >> r/.git/config && "
        "for i in $(seq 500); do printf '\\tpath = ../big\\n' >> r/.git/config; done && "
        "touch planted"
    )
    job = await tools.call("run_terminal", {"command": plant, "background": True})
    assert job.ok, job.text
    for _ in range(600):
        if (root / "planted").exists():
            break
        await asyncio.sleep(0.05)
    assert (root / "planted").exists(), "the background job did not plant its config"
    outcome, used = await peak(tools.call("write_file", {"path": "r/notes.txt", "content": "x"}))
    assert outcome.ok, outcome.text
    assert used < BOUND


# ---------------------------------------------------------------------- quarantine


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    """A data folder on another file system than the workspace (a tmpfs), so moving into the
    quarantine cannot be a rename."""
    if not os.access("/dev/shm", os.W_OK):
        pytest.skip("/dev/shm is not writable")
    folder = Path(tempfile.mkdtemp(prefix="opencomposer-data-", dir="/dev/shm"))
    if os.stat(folder).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("/dev/shm is on the same file system as the workspace")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def across(bwrap: Path, root: Path, other_fs: Path) -> AsyncIterator[ToolHarness]:
    harness = ToolHarness(Workspace(root), ToolSettings(), other_fs)
    yield harness
    await harness.close()


def guard(outcome: CallOutcome) -> dict[str, dict[str, str]]:
    return {change["path"]: change for change in outcome.data.get("git_guard", [])}


def hooks_left(root: Path, repo: str = "sub") -> list[str]:
    return sorted(
        p.name for p in (root / repo / ".git/hooks").iterdir() if not p.name.endswith(".sample")
    )


async def test_a_sparse_hook_is_kept_as_its_sparse_head_across_file_systems(
    across: ToolHarness, root: Path, other_fs: Path
):
    """A 1.9 GB sparse hook planted in a new repository: the quarantine keeps its first MiB,
    still a hole (no block written), the workspace loses it, and the copy costs the data
    folder nothing."""
    outcome, used = await peak(
        run(across, f"git init -q sub && truncate -s {SPARSE} sub/.git/hooks/pre-commit")
    )
    assert used < BOUND
    change = guard(outcome)["sub/.git/hooks/pre-commit"]
    assert change["action"] == "moved aside"
    assert f"pre-commit: {SPARSE:,} bytes, its first {KEEP_FILE_BYTES:,} kept" in change["detail"]
    kept = Path(change["kept"])
    assert kept.is_relative_to(other_fs / "quarantine")
    assert (kept.stat().st_size, kept.stat().st_blocks) == (KEEP_FILE_BYTES, 0)
    assert hooks_left(root) == []
    assert disk_usage(other_fs / "quarantine") == 0


async def test_a_dense_hook_keeps_its_first_mebibyte_and_a_review_keeps_sixteen(
    across: ToolHarness, root: Path, other_fs: Path
):
    """Twenty hooks of 3 MiB real data: each copy is the hook's first MiB exactly, the review
    copies 16 MiB in all (the rest kept empty, and said so), and every hook leaves the
    workspace."""
    names = [f"hook{n:02}" for n in range(20)]
    # hooks: any name in a git directory's own hooks/ is moved.
    plant = " && ".join(f"yes abcdefgh | head -c 3145728 > sub/.git/hooks/{name}" for name in names)
    outcome = await run(across, f"git init -q sub && {plant}")
    changes = guard(outcome)
    assert sorted(changes) == [f"sub/.git/hooks/{name}" for name in names]
    head = (b"abcdefgh\n" * (KEEP_FILE_BYTES // 9 + 1))[:KEEP_FILE_BYTES]
    sizes = []
    for change in changes.values():
        kept = Path(change["kept"]).read_bytes()
        assert head.startswith(kept)
        sizes.append(len(kept))
    assert sum(sizes) == KEEP_BYTES
    assert sorted(sizes) == [0] * 4 + [KEEP_FILE_BYTES] * 16
    assert hooks_left(root) == []
    assert disk_usage(other_fs / "quarantine") <= KEEP_BYTES + MiB


async def test_a_folder_of_many_files_keeps_a_thousand_entries(
    across: ToolHarness, root: Path, other_fs: Path
):
    """A rebase-merge folder (git runs its todo list's exec lines) of 1,500 files: the
    quarantine keeps 1,000 entries and says how many it left out; the folder is gone."""
    outcome = await run(
        across,
        "git init -q sub && mkdir sub/.git/rebase-merge && cd sub/.git/rebase-merge && "
        "for i in $(seq 1500); do echo $i > f$i; done",
    )
    change = guard(outcome)["sub/.git/rebase-merge"]
    assert change["action"] == "moved aside"
    assert (
        f"501 entries not kept (the quarantine keeps {KEEP_ENTRIES:,} a review)" in change["detail"]
    )
    kept = Path(change["kept"])
    assert len(list(kept.iterdir())) == KEEP_ENTRIES - 1  # the folder itself is one
    assert not (root / "sub/.git/rebase-merge").exists()


async def test_fifos_and_links_are_not_followed_or_opened(across: ToolHarness, root: Path):
    """A FIFO hook is not opened (nothing hangs) nor kept; a symlink hook is kept as the
    link it is (its target, a huge file, is not copied); both leave the workspace."""
    outcome = await run(
        across,
        f"git init -q sub && mkfifo sub/.git/hooks/pre-push && truncate -s {SPARSE} huge && "
        "ln -s ../../../huge sub/.git/hooks/post-checkout",
    )
    changes = guard(outcome)
    assert "not a regular file, not kept" in changes["sub/.git/hooks/pre-push"]["detail"]
    link = Path(changes["sub/.git/hooks/post-checkout"]["kept"])
    assert link.is_symlink() and os.readlink(link) == "../../../huge"
    assert hooks_left(root) == []


async def test_an_oversized_config_is_moved_aside_whole(tools: ToolHarness, root: Path):
    """A 1.5 MB config with a program-naming key at its end: not cut at 1 MiB and rewritten
    (which would keep a config git reads differently), but moved aside, key and all."""
    outcome = await run(
        tools,
        "git init -q sub && (head -c 1500000 /dev/zero | tr '\\0' '#'; "
        "printf '\\n[core]\\n\\tfsmonitor = touch /tmp/ran\\n') >> sub/.git/config",
    )
    change = guard(outcome)["sub/.git/config"]
    assert change["action"] == "moved aside"
    assert "over 1,048,576 bytes" in change["detail"]
    assert Path(change["kept"]).read_bytes().endswith(b"fsmonitor = touch /tmp/ran\n")
    assert not (root / "sub/.git/config").exists()


async def test_on_one_file_system_the_quarantine_renames_whatever_the_size(
    tools: ToolHarness, root: Path, data: Path
):
    """The control: where a rename is possible, the sparse hook is kept whole, as the same
    file (holes and all), at no cost."""
    outcome = await run(tools, f"git init -q sub && truncate -s {SPARSE} sub/.git/hooks/pre-commit")
    change = guard(outcome)["sub/.git/hooks/pre-commit"]
    assert (change["action"], change["detail"]) == ("moved aside", "hook")
    assert Path(change["kept"]).stat().st_size == SPARSE
    assert disk_usage(data / "quarantine") == 0
