"""Neutralizing a git directory, hooks folder or config file that a command made: whatever in
it the host's git would run is moved into a quarantine folder, and a config keeps only the
keys git_config knows to name no program.

Everything here works from descriptors opened beneath the workspace root without following
a symlink, so a command still running cannot swap a folder for a link and make us move the
user's files: a link met on the way fails the operation, which is then reported.

Moving is a rename where the quarantine folder shares the workspace's file system; across
file systems it is a bounded copy (`set_aside`: each file's head, holes kept, a budget per
review) and the original is removed. When the data folder has no room, nothing is kept and
the original is removed all the same: the host's git must not find it either way.
"""

import contextlib
import errno
import os
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.tools.terminal import set_aside
from opencomposer.agent.tools.terminal.git_config import is_safe, parse_config, render_config
from opencomposer.agent.tools.terminal.git_scan import real_path
from opencomposer.data_folder import full, is_full

# Names git runs from a hooks folder (githooks(5), git 2.47). In a git directory's own
# hooks/ everything but the samples goes; a configured hooks folder may be a project folder,
# so only these leave it.
HOOK_NAMES = frozenset({
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive",
    "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc",
    "post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-changelist",
    "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change",
})  # fmt: skip
# Files of a git directory that make the host's git run something or read elsewhere:
# per-worktree config, and in-progress rebase and cherry-pick state, whose todo lists hold
# `exec` lines that `git rebase --continue` runs.
_RUNNABLE_STATE = ("config.worktree", "rebase-merge", "rebase-apply", "sequencer")
# Submodule and worktree git directories nest inside a git directory; deeper than this is
# not a layout git makes.
_MAX_NESTING = 8
_CONFIG_BYTES = 1024 * 1024

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class GitChange:
    """One thing a command left that the host's git would have run, and what became of it."""

    path: str
    """Workspace-relative."""

    action: str
    """"moved aside", "removed" (moved, but nothing of it could be kept), "rewritten", or
    "not checked" (it could not be opened safely)."""

    detail: str
    kept: str
    """Where the original is kept (empty when nothing was moved)."""

    def line(self) -> str:
        return f"{self.path} {self.action} ({self.detail})"


class Quarantine:
    """Moves things out of one workspace into one folder per review, by workspace path."""

    def __init__(self, root: Path, folder: Path) -> None:
        self.root = root
        self.folder = folder
        self._batch: Path | None = None
        self._budget = set_aside.Budget()

    def begin(self) -> None:
        """A new review: what it moves goes into a folder of its own, within a budget of its
        own for copies across file systems."""
        self._batch = None
        self._budget = set_aside.Budget()

    # ------------------------------------------------------------------ what to clean

    def gitdir(self, gitdir: Path, depth: int = 0) -> list[GitChange]:
        """Hooks, commondir pointing out of the workspace, per-worktree config, rebase state,
        the config's unsafe keys; then the submodule and worktree git directories inside."""
        changes: list[GitChange] = []
        with self._opened(gitdir, changes) as fd:
            if fd is None:
                return changes
            changes += self._hooks_of(fd, gitdir)
            if _exists(fd, "commondir") and not self._inside(gitdir, _read(fd, "commondir")):
                changes.append(self._move(fd, gitdir, "commondir", "points out of the workspace"))
            for name in _RUNNABLE_STATE:
                if _exists(fd, name):
                    changes.append(self._move(fd, gitdir, name, "runs commands on the host"))
            changes += self._config_in(fd, gitdir, "config")
            nested = [] if depth >= _MAX_NESTING else list(_nested_gitdirs(fd))
        for relative in nested:
            changes += self.gitdir(gitdir / relative, depth + 1)
        return changes

    def hooks(self, folder: Path) -> list[GitChange]:
        """A configured hooks folder: the files named as hooks."""
        changes: list[GitChange] = []
        with self._opened(folder, changes) as fd:
            if fd is not None:
                for name in sorted(_names(fd)):
                    if name in HOOK_NAMES:
                        changes.append(self._move(fd, folder, name, "hook"))
        return changes

    def pointer(self, path: Path) -> list[GitChange]:
        """A `.git` file or symlink naming a git directory outside the workspace."""
        changes: list[GitChange] = []
        with self._opened(path.parent, changes) as fd:
            if fd is not None and _exists(fd, path.name):
                changes.append(
                    self._move(
                        fd, path.parent, path.name, "names a git directory outside the workspace"
                    )
                )
        return changes

    def config(self, path: Path) -> list[GitChange]:
        """A config file a repository includes from the workspace."""
        changes: list[GitChange] = []
        with self._opened(path.parent, changes) as fd:
            if fd is not None:
                changes += self._config_in(fd, path.parent, path.name)
        return changes

    # ------------------------------------------------------------------ how

    def _hooks_of(self, fd: int, gitdir: Path) -> list[GitChange]:
        info = _lstat(fd, "hooks")
        if info is None:
            return []
        if not stat.S_ISDIR(info.st_mode):
            return [self._move(fd, gitdir, "hooks", "not a folder")]
        hooks = os.open("hooks", _FOLDER, dir_fd=fd)
        try:
            return [
                self._move(hooks, gitdir / "hooks", name, "hook")
                for name in sorted(_names(hooks))
                if not name.endswith(".sample")
            ]
        finally:
            os.close(hooks)

    def _inside(self, gitdir: Path, pointer: bytes | None) -> bool:
        """Whether a commondir's text leads into the workspace (git follows a symlink to
        read it; we do not, so one is taken for leading out)."""
        if pointer is None:
            return False
        return real_path(gitdir / pointer.decode(errors="replace").strip()).is_relative_to(
            self.root
        )

    def _config_in(self, fd: int, folder: Path, name: str) -> list[GitChange]:
        if not _exists(fd, name):
            return []
        original = _read(fd, name, _CONFIG_BYTES)
        if original is None:  # git would follow a symlink to wherever it leads
            why = f"not a regular file, or over {_CONFIG_BYTES:,} bytes"
            return [self._move(fd, folder, name, why)]
        entries = parse_config(original)
        if entries is None:
            return [self._move(fd, folder, name, "not a config git can read here")]
        kept = [(key, value) for key, value in entries if is_safe(key, value)]
        if len(kept) == len(entries):
            return []
        dropped = "removed " + ", ".join(sorted({k for k, v in entries if not is_safe(k, v)}))
        kept_at = ""
        try:
            destination = self._destination(folder / name)
            destination.write_bytes(original)
            kept_at = str(destination)
        except OSError as exc:
            if not is_full(exc):
                raise
            dropped += f"; the original not kept: {full(self.folder.parent, exc).message}"
        _replace(fd, name, render_config(kept))
        return [GitChange(self._shown(folder / name), "rewritten", dropped, kept_at)]

    def _move(self, fd: int, folder: Path, name: str, why: str) -> GitChange:
        """Set `name` aside: renamed into the quarantine folder, or copied there within the
        review's budget and removed; removed alone when the data folder has no room."""
        shown = self._shown(folder / name)
        destination: Path | None = None
        try:
            destination = self._destination(folder / name)
            try:
                os.rename(name, destination, src_dir_fd=fd)
                return GitChange(shown, "moved aside", why, str(destination))
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
            notes = set_aside.copy_out(fd, name, destination, self._budget)
        except OSError as exc:
            if not is_full(exc):
                raise
            if destination is not None:
                set_aside.discard(destination)
            set_aside.remove(fd, name)
            not_kept = f"not kept: {full(self.folder.parent, exc).message}"
            return GitChange(shown, "removed", f"{why}; {not_kept}", "")
        set_aside.remove(fd, name)
        return GitChange(shown, "moved aside", "; ".join([why, *notes]), str(destination))

    def _destination(self, path: Path) -> Path:
        """Where `path` is kept: under this review's folder, inside the quarantine folder,
        which is 0700 (what is kept there may be private), like the data folder holding it."""
        if self._batch is None:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.folder.chmod(0o700)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            self._batch = self.folder / f"{stamp}-{uuid.uuid4().hex[:8]}"
        destination = self._batch / path.relative_to(self.root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        return destination

    def _shown(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    @contextlib.contextmanager
    def _opened(self, folder: Path, changes: list[GitChange]) -> Iterator[int | None]:
        """A descriptor of `folder`, opened name by name from the root without following a
        symlink; None (with a "not checked" change) when that fails."""
        try:
            root = os.open(self.root, _FOLDER)
            try:
                fd = _descend(root, folder.relative_to(self.root).parts)
            finally:
                os.close(root)
        except FileNotFoundError:
            yield None
            return
        except OSError as exc:
            changes.append(
                GitChange(self._shown(folder), "not checked", exc.strerror or str(exc), "")
            )
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)


def _nested_gitdirs(fd: int) -> Iterator[Path]:
    """Git directories under modules/ (submodules, whose names may hold slashes) and
    worktrees/: folders with a HEAD or config."""
    for top in ("modules", "worktrees"):
        info = _lstat(fd, top)
        if info is None or not stat.S_ISDIR(info.st_mode):
            continue
        stack = [Path(top)]
        while stack:
            relative = stack.pop()
            child = _descend(fd, relative.parts)
            try:
                names = _names(child)
                if "HEAD" in names or "config" in names:
                    yield relative
                    continue
                for name in names:
                    info = _lstat(child, name)
                    if (
                        info is not None
                        and stat.S_ISDIR(info.st_mode)
                        and len(relative.parts) < _MAX_NESTING
                    ):
                        stack.append(relative / name)
            finally:
                os.close(child)


def _descend(fd: int, names: tuple[str, ...]) -> int:
    """A new descriptor of the folder `names` below `fd`, never through a symlink."""
    current = os.dup(fd)
    try:
        for name in names:
            child = os.open(name, _FOLDER, dir_fd=current)
            os.close(current)
            current = child
    except BaseException:
        os.close(current)
        raise
    return current


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return [entry.name for entry in entries]


def _lstat(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _exists(fd: int, name: str) -> bool:
    return _lstat(fd, name) is not None


def _read(fd: int, name: str, limit: int = 4096) -> bytes | None:
    """A regular file's bytes; None when it is missing, not a regular file, or larger than
    `limit` (judged on the opened descriptor, then by what reading finds)."""
    try:
        file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return None
    with os.fdopen(file, "rb") as handle:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = handle.read(limit + 1)
        return data if len(data) <= limit else None


def _replace(fd: int, name: str, text: str) -> None:
    """Write `name` in the folder atomically: a new file beside it, then a rename."""
    temp = f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    file = os.open(
        temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd
    )
    try:
        with os.fdopen(file, "w") as handle:
            handle.write(text)
        os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)
        raise
