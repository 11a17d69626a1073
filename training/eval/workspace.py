"""The starting repository of one trial, and what the verifier restores of it.

A trial owns a folder: `workspace/` is all the agent sees; `private/` (hidden from the agent's
sandbox with the rest of the run) keeps the snapshot of the protected paths and, once the
agent is done, the verifier's copy of the tests and its logs. The workspace is a git
repository with a single commit of the starting state, made without the user's git config,
hooks or templates: the agent can diff its own work, and no history holds an answer (any
`.git` the task's files carried is removed first).
"""

import fnmatch
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.tools.sandbox import Mount
from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.sandboxed import run_script
from opencomposer.training.eval.task import Task

_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "opencomposer bench",
    "GIT_AUTHOR_EMAIL": "bench@opencomposer.invalid",
    "GIT_COMMITTER_NAME": "opencomposer bench",
    "GIT_COMMITTER_EMAIL": "bench@opencomposer.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


class TaskSetupError(TrainingError):
    """The task's environment could not be built (its setup.sh failed or timed out)."""


@dataclass(frozen=True)
class TrialDirs:
    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def protected(self) -> Path:
        return self.private / "protected"


async def build_workspace(
    task: Task, dirs: TrialDirs, *, data_dir: Path, hidden: list[Path]
) -> None:
    """A fresh starting repository in `dirs.workspace` (whatever was there is removed)."""
    if dirs.root.exists():
        shutil.rmtree(dirs.root)
    dirs.private.mkdir(parents=True)
    if task.app_dir.is_dir():
        shutil.copytree(task.app_dir, dirs.workspace, symlinks=True)
    else:
        dirs.workspace.mkdir()
    if task.setup_script.is_file():
        env = task.config.environment
        run = await run_script(
            "bash /environment/setup.sh",
            workspace=dirs.workspace,
            mounts=[
                Mount(task.setup_script.parent, Path("/environment")),
                Mount(dirs.workspace, Path("/app"), writable=True),
            ],
            data_dir=data_dir,
            hidden=hidden,
            timeout=env.build_timeout_sec,
            network=env.allow_internet,
            memory_mb=env.memory_mb,
        )
        if run.exit_code != 0:
            why = "timed out" if run.timed_out else f"exited with {run.exit_code}"
            raise TaskSetupError(
                f"{task.name}: environment/setup.sh {why}: {run.output[-2000:].strip()}"
            )
    _remove_git_directories(dirs.workspace)
    _commit_starting_state(dirs.workspace)
    snapshot_protected(task, dirs)


def _remove_git_directories(root: Path) -> None:
    for folder, subfolders, files in os.walk(root):
        for name in [*subfolders, *files]:
            if name == ".git":
                path = Path(folder, name)
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                    subfolders.remove(name)
                else:
                    path.unlink()


def _commit_starting_state(workspace: Path) -> None:
    env = {**os.environ, **_GIT_ENV}
    for argv in (
        ["git", "init", "-q", "--template=", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "--no-verify", "--allow-empty", "-m", "starting state"],
    ):
        done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise TaskSetupError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def matches(relative: str, patterns: list[str]) -> bool:
    """fnmatch over the path relative to the workspace (`*` crosses folders); a pattern that
    starts with `**/` matches at the top too (`**/conftest.py` covers ./conftest.py)."""
    return any(
        fnmatch.fnmatchcase(relative, pattern)
        or (pattern.startswith("**/") and fnmatch.fnmatchcase(relative, pattern[3:]))
        for pattern in patterns
    )


def _protected_files(root: Path, patterns: list[str]) -> list[str]:
    """Matching paths under `root`, symlinks never followed (an agent's `tests -> /` link
    must not make the walk cover the host)."""
    found = []
    for folder, subfolders, files in os.walk(root, followlinks=False):
        subfolders[:] = [name for name in subfolders if name != ".git"]
        for name in files + [d for d in subfolders if Path(folder, d).is_symlink()]:
            relative = Path(folder, name).relative_to(root).as_posix()
            if matches(relative, patterns):
                found.append(relative)
    return sorted(found)


def snapshot_protected(task: Task, dirs: TrialDirs) -> None:
    patterns = task.config.verifier.protected_paths
    for relative in _protected_files(dirs.workspace, patterns):
        target = dirs.protected / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(dirs.workspace / relative, target, follow_symlinks=False)


def restore_protected(task: Task, dirs: TrialDirs) -> list[str]:
    """Put the protected paths back as they started: what the agent changed is restored,
    what it planted is removed. Returns those paths, sorted."""
    patterns = task.config.verifier.protected_paths
    if not patterns:
        return []
    original = set(_protected_files(dirs.protected, patterns)) if dirs.protected.exists() else set()
    changed = []
    for relative in _protected_files(dirs.workspace, patterns):
        if relative not in original:
            _remove(dirs.workspace / relative)
            changed.append(relative)
    for relative in sorted(original):
        current, saved = dirs.workspace / relative, dirs.protected / relative
        if _digest(current) != _digest(saved):
            _remove(current)
            _make_parents(dirs.workspace, current.parent)
            shutil.copy2(saved, current, follow_symlinks=False)
            changed.append(relative)
    return sorted(set(changed))


def _make_parents(root: Path, folder: Path) -> None:
    """The folders down to `folder`, any symlink or file the agent put in their way removed."""
    path = root
    for part in folder.relative_to(root).parts:
        path = path / part
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
        path.mkdir(exist_ok=True)


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def _digest(path: Path) -> str | None:
    if path.is_symlink():
        return "link:" + os.readlink(path)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
