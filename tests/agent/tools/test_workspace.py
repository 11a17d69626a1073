"""Confinement: nothing outside the workspace is reachable, by `..`, absolute paths or links."""

import os
from pathlib import Path

import pytest

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
    buffers = {root / "same.py": "x\r\n", root / "changed.py": "y\n",
               root / "new.py": "z\n", root.parent / "outside.py": "w\n"}
    assert Workspace(root, overlay=buffers).unsaved() == ["changed.py", "new.py"]
