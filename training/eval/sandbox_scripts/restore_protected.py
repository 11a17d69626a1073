"""Puts a trial's protected paths back as they started: what the agent changed is restored,
what it planted is removed, and the paths are printed as a JSON list.

Run by the verifier inside a sandbox of its own (`python -I`, so nothing in the workspace is
imported), where the workspace is the only place that can be written and the starting copies
are read-only: whatever the agent left (a link where a folder was, a FIFO where a file was, a
file of a terabyte) can only cost time, which the sandbox bounds, never a file of the host.
Links are still never followed: a protected file reached through a linked folder counts as
changed, and the link is replaced by a real folder. Only regular files are read, and only as
far as their starting copy's size.

The verifier's host side uses `matches` and `protected_files` to take the starting copies.
Standard library only.

Usage: python -I restore_protected.py WORKSPACE SNAPSHOT PATTERNS_JSON
"""

import fnmatch
import json
import os
import shutil
import stat
import sys
from pathlib import Path


def matches(relative: str, patterns: list[str]) -> bool:
    """fnmatch over the path relative to the workspace (`*` crosses folders); a pattern that
    starts with `**/` matches at the top too (`**/conftest.py` covers ./conftest.py)."""
    return any(
        fnmatch.fnmatchcase(relative, pattern)
        or (pattern.startswith("**/") and fnmatch.fnmatchcase(relative, pattern[3:]))
        for pattern in patterns
    )


def protected_files(root: Path, patterns: list[str]) -> list[str]:
    """Matching paths under `root`, symlinks never followed (an agent's `tests -> /` link
    must not make the walk cover the system); a link to a folder is listed itself."""
    found = []
    for folder, subfolders, files in os.walk(root, followlinks=False):
        subfolders[:] = [name for name in subfolders if name != ".git"]
        for name in files + [d for d in subfolders if Path(folder, d).is_symlink()]:
            relative = Path(folder, name).relative_to(root).as_posix()
            if matches(relative, patterns):
                found.append(relative)
    return sorted(found)


def restore(workspace: Path, snapshot: Path, patterns: list[str]) -> list[str]:
    original = set(protected_files(snapshot, patterns)) if snapshot.is_dir() else set()
    changed = set()
    for relative in protected_files(workspace, patterns):
        if relative not in original:
            _remove(workspace / relative)
            changed.add(relative)
    for relative in sorted(original):
        saved = snapshot / relative
        if _through_link(workspace, relative) or not _same(workspace / relative, saved):
            _make_parents(workspace, Path(relative).parent)
            _remove(workspace / relative)
            shutil.copy2(saved, workspace / relative, follow_symlinks=False)
            changed.add(relative)
    return sorted(changed)


def _through_link(root: Path, relative: str) -> bool:
    """Whether a folder on the way to `relative` is not a real folder (a link, a file)."""
    path = root
    for part in Path(relative).parent.parts:
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return True
    return False


def _same(current: Path, saved: Path) -> bool:
    if saved.is_symlink():
        return current.is_symlink() and os.readlink(current) == os.readlink(saved)
    expected = saved.read_bytes()
    try:
        fd = os.open(current, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False  # a FIFO, a device, a folder: never opened for reading
        return os.read(fd, len(expected) + 1) == expected if expected else not os.read(fd, 1)
    finally:
        os.close(fd)


def _make_parents(root: Path, folder: Path) -> None:
    """The folders down to `folder`, any link or file in their way removed."""
    path = root
    for part in folder.parts:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
        path.mkdir(exist_ok=True)


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


if __name__ == "__main__":
    workspace, snapshot, patterns = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
    print(json.dumps(restore(workspace, snapshot, patterns)))
