"""What the model is told about its surroundings.

Thread facts (OS, shell, workspace root, date) go into the system prompt once, when the thread
starts, and are stored with it: the system prompt never changes within a thread, so the
engine's prefix cache stays valid across turns. Turn facts (git status, recently viewed and
edited files) change between turns, so they ride on the turn's user message and are logged
with it. The git summary is the harness's (`Harness.git_summary`): it runs where the tools
do, in their sandbox.

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
from opencomposer.agent.tools.harness_protocol import Harness
from opencomposer.agent.tools.sandbox import shell

RECENT_FILES = 10


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

    async def git(self, harness: Harness) -> str | None:
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

    async def git(self, harness: Harness) -> str | None:
        return await harness.git_summary()


@dataclass(frozen=True)
class FixedFacts:
    """Facts given once, for prompts that must not depend on where or when they are built."""

    description: MachineDescription
    git_summary: str | None = None

    def machine(self) -> MachineDescription:
        return self.description

    async def git(self, harness: Harness) -> str | None:
        return self.git_summary


def system_prompt(harness: Harness, facts: Facts | None = None) -> str:
    machine = (facts or MachineFacts()).machine()
    return render(
        "system",
        os=machine.os,
        shell=machine.shell,
        workspace=str(harness.root),
        date=machine.date,
        network=harness.settings.allow_network,
    )


async def turn_context(
    harness: Harness, items: Sequence[Item], facts: Facts | None = None
) -> str | None:
    """The facts for a new turn, or None when there are none (no repository, no history)."""
    edited, viewed = touched_files(items)
    git = await (facts or MachineFacts()).git(harness)
    if not (git or edited or viewed):
        return None
    return render(
        "turn_context", git=git, edited=edited[:RECENT_FILES], viewed=viewed[:RECENT_FILES]
    )
