"""The starting repository of one trial, and what the verifier restores of it.

A trial owns a folder: `workspace/` is all the agent sees; `private/` (hidden from the agent's
sandbox with the rest of the run) keeps the snapshot of the protected paths and, once the
agent is done, the verifier's copy of the tests and its logs. Once the agent has worked in the
workspace, nothing on the host side reads or changes it: restoring and diffing run in
sandboxes of their own. The workspace is a git
repository with a single commit of the starting state, made without the user's git config,
hooks or templates: the agent can diff its own work, and no history holds an answer (any
`.git` the task's files carried is removed first).
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.tools.sandbox import Mount
from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.dockerfile import CopyStep, DockerBuild, copy_into
from opencomposer.training.eval.sandbox_scripts import restore_protected as restore_script
from opencomposer.training.eval.sandbox_scripts.restore_protected import protected_files
from opencomposer.training.eval.sandboxed import run_script
from opencomposer.training.eval.task import Task

# Seconds the sandboxed restore and diff may take: a few files put back, a repository of
# tasks' size hashed (the built-in ones take well under a second); more means the agent left
# something that makes them slow on purpose.
_RESTORE_TIMEOUT = 120.0
_DIFF_TIMEOUT = 120.0
# Files larger than this are not counted in a trial's diff.
_DIFF_FILE_LIMIT = 64 * 1024 * 1024

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
    """A fresh starting repository in `dirs.workspace` (whatever was there is removed): the
    task's app/ and setup.sh, or its Dockerfile built in the sandbox."""
    if dirs.root.exists():
        shutil.rmtree(dirs.root)
    dirs.private.mkdir(parents=True)
    if task.app_dir.is_dir():
        shutil.copytree(task.app_dir, dirs.workspace, symlinks=True)
    else:
        dirs.workspace.mkdir()
    if task.setup_script.is_file():
        await _build_step(
            task, dirs, "bash /environment/setup.sh", "environment/setup.sh", data_dir, hidden
        )
    elif task.docker is not None:
        await _build_image(task, task.docker, dirs, data_dir, hidden)
    _remove_git_directories(dirs.workspace)
    _commit_starting_state(dirs.workspace)
    snapshot_protected(task, dirs)


async def _build_image(
    task: Task, build: DockerBuild, dirs: TrialDirs, data_dir: Path, hidden: list[Path]
) -> None:
    """The Dockerfile's COPY and RUN steps in order: files into the workspace, commands in
    the sandbox with the workspace at the WORKDIR."""
    context = task.root / "environment"
    for step in build.steps:
        if isinstance(step, CopyStep):
            copy_into(step, context, dirs.workspace, build.workdir)
            continue
        command = (
            f"mkdir -p {shlex.quote(str(step.workdir))} 2>/dev/null; "
            + shlex.join(["cd", str(step.workdir)])
            + " && exec "
            + shlex.join(step.argv)
        )
        await _build_step(
            task,
            dirs,
            command,
            f"environment/Dockerfile line {step.line} (RUN)",
            data_dir,
            hidden,
            env=step.env,
        )


async def _build_step(
    task: Task,
    dirs: TrialDirs,
    command: str,
    what: str,
    data_dir: Path,
    hidden: list[Path],
    env: dict[str, str] | None = None,
) -> None:
    environment = task.config.environment
    run = await run_script(
        command,
        workspace=dirs.workspace,
        mounts=[
            Mount(task.root / "environment", Path("/environment")),
            Mount(dirs.workspace, Path(task.workdir), writable=True),
        ],
        data_dir=data_dir,
        hidden=hidden,
        timeout=environment.build_timeout_sec,
        env=env,
        network=environment.allow_internet,
        memory_mb=environment.memory_mb,
    )
    if run.exit_code != 0:
        why = "timed out" if run.timed_out else f"exited with {run.exit_code}"
        raise TaskSetupError(f"{task.name}: {what} {why}: {run.output[-2000:].strip()}")


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


def snapshot_protected(task: Task, dirs: TrialDirs) -> None:
    """The starting copies of the protected paths, taken from the repository as built (the
    task's files and its setup, never the agent's), kept where the agent cannot see."""
    patterns = task.config.verifier.protected_paths
    for relative in protected_files(dirs.workspace, patterns):
        target = dirs.protected / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(dirs.workspace / relative, target, follow_symlinks=False)


async def restore_protected(
    task: Task, dirs: TrialDirs, *, data_dir: Path, hidden: list[Path]
) -> list[str]:
    """Put the protected paths back as they started, in a sandbox where only the workspace
    can be written (`sandbox_scripts/restore_protected.py`). Returns those paths, sorted;
    raises `TaskSetupError` when they could not be put back (the tests would then grade what
    the agent left)."""
    patterns = task.config.verifier.protected_paths
    if not patterns:
        return []
    dirs.protected.mkdir(parents=True, exist_ok=True)
    run = await run_script(
        f"exec {shlex.quote(sys.executable)} -I /verifier/restore.py /app /protected "
        + shlex.quote(json.dumps(patterns)),
        workspace=dirs.workspace,
        mounts=[
            Mount(Path(restore_script.__file__), Path("/verifier/restore.py")),
            Mount(dirs.protected, Path("/protected")),
            Mount(dirs.workspace, Path("/app"), writable=True),
        ],
        data_dir=data_dir,
        hidden=hidden,
        timeout=_RESTORE_TIMEOUT,
    )
    try:
        if run.exit_code != 0:
            raise ValueError(run.output[-500:].strip())
        restored = json.loads(run.output.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        why = "timed out" if run.timed_out else str(exc)
        raise TaskSetupError(f"the protected paths could not be put back: {why}") from None
    return [str(path) for path in restored]


async def changed_lines(dirs: TrialDirs, *, data_dir: Path, hidden: list[Path]) -> tuple[int, int]:
    """Lines added plus removed and files touched since the starting commit, untracked files
    included, counted by git in a sandbox through a throwaway index. The workspace is the
    agent's: FIFOs, sockets and devices (git would block reading one) and files over
    `_DIFF_FILE_LIMIT` (data, not code: a sparse terabyte would take git an hour to hash)
    are left out, and the sandbox's time limit bounds the rest. (0, 0) when git could not
    tell in time."""
    objects = shlex.quote(str(dirs.workspace / ".git" / "objects"))
    run = await run_script(
        # The index and the new objects go to the sandbox's /tmp: the repository's git
        # directory stays read-only, as in the agent's sandbox.
        "export GIT_INDEX_FILE=/tmp/index GIT_OBJECT_DIRECTORY=/tmp/objects "
        f"GIT_ALTERNATE_OBJECT_DIRECTORIES={objects} GIT_CONFIG_GLOBAL=/dev/null "
        "GIT_CONFIG_NOSYSTEM=1 && mkdir /tmp/objects && "
        "{ printf '.\\0'; find . -path ./.git -prune -o \\( ! -type f ! -type d ! -type l -o "
        f"-type f -size +{_DIFF_FILE_LIMIT // 1024}k \\) "
        "-printf ':(exclude,literal)%P\\0'; } > /tmp/paths && "
        "git read-tree HEAD && "
        "git add -A --pathspec-from-file=/tmp/paths --pathspec-file-nul && "
        "git diff --cached --numstat HEAD",
        workspace=dirs.workspace,
        mounts=[],
        data_dir=data_dir,
        hidden=hidden,
        timeout=_DIFF_TIMEOUT,
    )
    lines = files = 0
    if run.exit_code != 0:
        return lines, files
    for row in run.output.splitlines():
        fields = row.split("\t")
        if len(fields) < 3 or not all(f.isdigit() or f == "-" for f in fields[:2]):
            continue  # a warning git printed, not a row
        files += 1
        lines += sum(int(f) for f in fields[:2] if f.isdigit())  # "-": a binary file
    return lines, files
