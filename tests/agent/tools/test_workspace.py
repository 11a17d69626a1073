"""Confinement: nothing outside the workspace is reachable, by `..`, absolute paths or links."""

import asyncio
import os
from pathlib import Path

import pytest

from opencomposer.agent.tools.beneath import PathChanged
from opencomposer.agent.tools.errors import Denied, InvalidArguments, NotFound
from opencomposer.agent.tools.workspace import Workspace


def test_paths_inside_resolve(root: Path):
    (root / "src").mkdir()
    workspace = Workspace(root)
    assert workspace.resolve("src/../src/a.py") == root / "src/a.py"
    assert workspace.resolve(str(root / "src")) == root / "src"
    assert workspace.resolve(".") == root
    assert workspace.relative(root) == "." and workspace.relative(root / "src/a.py") == "src/a.py"


@pytest.mark.parametrize("path", ["..", "../x", "/etc/passwd", "src/../../x", "~/.ssh/id_rsa"])
def test_escapes_are_denied(root: Path, path: str):
    (root / "src").mkdir()
    with pytest.raises(Denied, match="outside the workspace"):
        Workspace(root).resolve(path)


def test_symlinks_out_of_the_tree_are_denied(root: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    os.symlink(outside, root / "link")
    os.symlink(outside / "secret.txt", root / "file-link")
    workspace = Workspace(root)
    for path in ("link/secret.txt", "file-link", "link/new.txt"):
        with pytest.raises(Denied):
            workspace.resolve(path)


def test_bad_paths_and_roots(root: Path):
    with pytest.raises(InvalidArguments):
        Workspace(root).resolve("a\x00b")
    with pytest.raises(NotFound):
        Workspace(root / "missing")


def test_overlay_wins_over_disk(root: Path):
    (root / "a.py").write_bytes(b"old\r\n")
    (root / "b.py").write_bytes("\ufeffold\n".encode())
    buffers: dict[Path, str] = {}
    workspace = Workspace(root, overlay=buffers)
    buffers[root / "a.py"] = "unsaved\r\n"
    buffers[root / "b.py"] = "unsaved é\n"
    buffers[root / "new.py"] = "never saved\n"
    document = workspace.read_text(root / "a.py")
    assert (document.text, document.format.newline) == ("unsaved\r\n", "\r\n")
    # What a change starts from: the buffer, in the file's own encoding and BOM.
    assert workspace.current_bytes(root / "b.py") == "\ufeffunsaved é\n".encode()
    assert workspace.current_bytes(root / "new.py") == b"never saved\n"
    assert workspace.current_bytes(root / "missing.py") is None
    del buffers[root / "a.py"]
    assert workspace.read_text(root / "a.py").text == "old\r\n"
    assert workspace.current_bytes(root / "a.py") == b"old\r\n"


def test_unsaved_lists_buffers_that_differ_from_the_disk(root: Path):
    (root / "same.py").write_bytes(b"x\r\n")
    (root / "changed.py").write_bytes(b"x\n")
    buffers = {
        root / "same.py": "x\r\n",
        root / "changed.py": "y\n",
        root / "new.py": "z\n",
        root.parent / "outside.py": "w\n",
    }
    assert Workspace(root, overlay=buffers).unsaved() == ["changed.py", "new.py"]


# ---------------------------------------------------------------------- I/O beneath the root


def test_io_refuses_a_symlink_on_the_path_it_was_given(root: Path, tmp_path: Path):
    """The I/O methods take resolved paths; a symlink met on one means the tree changed since
    it was resolved, even one pointing inside: refused, never followed, nothing created."""
    (root / "real").mkdir()
    (root / "real/a.txt").write_text("a\n")
    os.symlink(root / "real", root / "alias")
    os.symlink(root / "real/a.txt", root / "a-link.txt")
    workspace = Workspace(root)
    for path in (root / "alias/a.txt", root / "a-link.txt"):
        with pytest.raises(PathChanged, match="the path changed while it was being opened"):
            workspace.read_bytes(path)
        with pytest.raises(PathChanged):
            workspace.stat(path)
        with pytest.raises(PathChanged):
            asyncio.run(workspace.writer.write(path, b"x"))
        with pytest.raises(PathChanged):
            asyncio.run(workspace.writer.delete(path))
    with pytest.raises(PathChanged):
        asyncio.run(workspace.writer.move(root / "real/a.txt", root / "alias/b.txt"))
    assert sorted(p.name for p in (root / "real").iterdir()) == ["a.txt"]
    assert (root / "real/a.txt").read_text() == "a\n" and (root / "a-link.txt").is_symlink()
    with pytest.raises(Denied):
        workspace.read_bytes(tmp_path / "elsewhere.txt")


def test_reads_refuse_what_is_not_a_regular_file_with_typed_errors(root: Path):
    (root / "dir").mkdir()
    (root / "big.txt").write_bytes(b"x" * 100)
    (root / "file.txt").write_text("f\n")
    os.mkfifo(root / "pipe")
    workspace = Workspace(root)
    for path, error, message in (
        ("missing.txt", NotFound, "does not exist"),
        ("file.txt/below", NotFound, "does not exist"),
        ("dir", InvalidArguments, "is a directory"),
        ("pipe", InvalidArguments, "not a regular file"),
    ):
        with pytest.raises(error, match=message):
            workspace.read_bytes(root / path)
    with pytest.raises(InvalidArguments, match="100 bytes, over the 10-byte limit"):
        workspace.read_bytes(root / "big.txt", limit=10)
    assert workspace.stat(root / "missing/below") is None
    assert workspace.is_dir(root / "dir") and workspace.is_file(root / "file.txt")
    assert not workspace.is_file(root / "pipe")


def test_a_failed_write_leaves_no_temporary_file(root: Path):
    (root / "file.txt").write_text("f\n")
    (root / "dir").mkdir()
    workspace = Workspace(root)
    with pytest.raises(NotADirectoryError):
        asyncio.run(workspace.writer.write(root / "file.txt/below.txt", b"x"))
    with pytest.raises(IsADirectoryError):
        asyncio.run(workspace.writer.write(root / "dir", b"x"))
    assert sorted(p.name for p in root.rglob("*")) == ["dir", "file.txt"]
