"""What the model is told about its surroundings.

Thread facts (OS, shell, workspace root, date) go into the system prompt once, when the thread
starts, and are stored with it: the system prompt never changes within a thread, so the
engine's prefix cache stays valid across turns. Turn facts (git status, recently viewed and
edited files) change between turns, so they ride on the turn's user message and are logged
with it. git runs in the command sandbox: a repository's own config can make `git status` run
programs (fsmonitor, clean filters).
"""

import platform
from collections.abc import Sequence
from datetime import date

from opencomposer.agent.context import touched_files
from opencomposer.agent.prompting import render
from opencomposer.agent.protocol.items import Item
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.terminal.sandbox import shell

# Lines of `git status` shown; a huge untracked tree must not flood the prompt.
MAX_STATUS_LINES = 30
GIT_TIMEOUT = 5.0
RECENT_FILES = 10
_GIT_STATUS = "git --no-optional-locks status --short --branch --untracked-files=normal"


def system_prompt(harness: ToolHarness) -> str:
    return render(
        "system",
        os=f"{platform.system()} {platform.release()}",
        shell=shell(),
        workspace=str(harness.workspace.root),
        date=date.today().isoformat(),
        network=harness.settings.allow_network,
    )


async def turn_context(harness: ToolHarness, items: Sequence[Item]) -> str | None:
    """The facts for a new turn, or None when there are none (no repository, no history)."""
    edited, viewed = touched_files(items)
    git = await git_summary(harness)
    if not (git or edited or viewed):
        return None
    return render(
        "turn_context", git=git, edited=edited[:RECENT_FILES], viewed=viewed[:RECENT_FILES]
    )


async def git_summary(harness: ToolHarness) -> str | None:
    """`branch main, 2 changed files` and the status lines, or None outside a repository."""
    if not (harness.workspace.root / ".git").exists():
        return None
    result = await harness.jobs.capture(
        _GIT_STATUS, cwd=harness.workspace.root, timeout=GIT_TIMEOUT
    )
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
