"""The workspace's git status as a new turn's prompt states it. git runs in the command
sandbox: a repository's own config can make `git status` run programs (fsmonitor, clean
filters)."""

from pathlib import Path

from opencomposer.agent.tools.terminal.jobs import JobManager

# Lines of `git status` shown; a huge untracked tree must not flood the prompt.
MAX_STATUS_LINES = 30
GIT_TIMEOUT = 5.0
_GIT_STATUS = "git --no-optional-locks status --short --branch --untracked-files=normal"


async def git_summary(jobs: JobManager, root: Path) -> str | None:
    """`branch main, 2 changed files` and the status lines, or None outside a repository."""
    if not (root / ".git").exists():
        return None
    result = await jobs.capture(_GIT_STATUS, cwd=root, timeout=GIT_TIMEOUT)
    if result is None:
        return "status unavailable (git status timed out)"
    exit_code, output = result
    if exit_code != 0:
        return None
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("## "):
        return None
    branch, changes = lines[0][3:], lines[1:]
    shown = changes[:MAX_STATUS_LINES]
    more = f"\n... and {len(changes) - len(shown)} more" if len(changes) > len(shown) else ""
    summary = f"branch {branch}, {len(changes)} changed file{'s' if len(changes) != 1 else ''}"
    return summary + "".join(f"\n{line}" for line in shown) + more
