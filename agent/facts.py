"""What the model is told about its surroundings.

Thread facts (OS, shell, workspace root, date) go into the system prompt once, when the thread
starts, and are stored with it: the system prompt never changes within a thread, so the
engine's prefix cache stays valid across turns. Turn facts (git status, recently viewed and
edited files) change between turns, so they ride on the turn's user message and are logged
with it. git runs in the command sandbox: a repository's own config can make `git status` run
programs (fsmonitor, clean filters).

Both come from a `Facts` source: `MachineFacts` reads this machine, and a rollout or a test
passes `FixedFacts` so that the same log gives exactly the same prompt anywhere, any day.
"""

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Protocol

from opencomposer.agent.context import touched_files
from opencomposer.agent.prompting import render
from opencomposer.agent.protocol.items import Item
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.sandbox import shell

# Lines of `git status` shown; a huge untracked tree must not flood the prompt.
MAX_STATUS_LINES = 30
GIT_TIMEOUT = 5.0
RECENT_FILES = 10
_GIT_STATUS = "git --no-optional-locks status --short --branch --untracked-files=normal"


@dataclass(frozen=True)
class MachineDescription:
    """What the system prompt says of the machine a thread runs on."""

    os: str
    shell: str
    date: str
    """ISO date, e.g. 2026-12-02."""


class Facts(Protocol):
    """Where the prompt's facts come from."""

    def machine(self) -> MachineDescription: ...

    async def git(self, harness: ToolHarness) -> str | None:
        """The workspace's git summary for a new turn; None outside a repository."""
        ...


class MachineFacts:
    """The facts of this machine, today, and the workspace's real `git status`."""

    def machine(self) -> MachineDescription:
        return MachineDescription(
            os=f"{platform.system()} {platform.release()}",
            shell=shell(),
            date=date.today().isoformat(),
        )

    async def git(self, harness: ToolHarness) -> str | None:
        return await git_summary(harness)


@dataclass(frozen=True)
class FixedFacts:
    """Facts given once, for prompts that must not depend on where or when they are built."""

    description: MachineDescription
    git_summary: str | None = None

    def machine(self) -> MachineDescription:
        return self.description

    async def git(self, harness: ToolHarness) -> str | None:
        return self.git_summary


def system_prompt(harness: ToolHarness, facts: Facts | None = None) -> str:
    machine = (facts or MachineFacts()).machine()
    return render(
        "system",
        os=machine.os,
        shell=machine.shell,
        workspace=str(harness.workspace.root),
        date=machine.date,
        network=harness.settings.allow_network,
    )


async def turn_context(
    harness: ToolHarness, items: Sequence[Item], facts: Facts | None = None
) -> str | None:
    """The facts for a new turn, or None when there are none (no repository, no history)."""
    edited, viewed = touched_files(items)
    git = await (facts or MachineFacts()).git(harness)
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
