"""The engine behind the terminal tools: sandboxes, the commands' environment, jobs with
soft timeouts and capped output, and command risk classification."""

from opencomposer.agent.tools.terminal.classify import Classification, classify_command
from opencomposer.agent.tools.terminal.environment import scrub_environment
from opencomposer.agent.tools.terminal.jobs import NO_OUTPUT, CommandResult, JobManager
from opencomposer.agent.tools.terminal.sandbox import (
    BubblewrapSandbox,
    FallbackSandbox,
    Sandbox,
    detect_sandbox,
    probe_bubblewrap,
)

__all__ = [
    "NO_OUTPUT",
    "BubblewrapSandbox",
    "Classification",
    "CommandResult",
    "FallbackSandbox",
    "JobManager",
    "Sandbox",
    "classify_command",
    "detect_sandbox",
    "probe_bubblewrap",
    "scrub_environment",
]
