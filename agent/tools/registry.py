"""The default tool set. Names and argument schemas are a contract: models are trained on
them, and clients and tests rely on them."""

from typing import Any

from opencomposer.agent.tools.base import Tool
from opencomposer.agent.tools.code_tools import SemanticSearch, Symbols
from opencomposer.agent.tools.edit_tools import ApplyPatch, EditFile
from opencomposer.agent.tools.files import DeleteFile, MoveFile, ReadFile, WriteFile
from opencomposer.agent.tools.search import Glob, Grep
from opencomposer.agent.tools.terminal_tools import (
    RunTerminal,
    TerminalInput,
    TerminalKill,
    TerminalOutput,
)
from opencomposer.agent.tools.todo import TodoWrite


def default_tools() -> list[Tool[Any]]:
    return [
        Grep(),
        Glob(),
        Symbols(),
        SemanticSearch(),
        ReadFile(),
        EditFile(),
        WriteFile(),
        ApplyPatch(),
        DeleteFile(),
        MoveFile(),
        RunTerminal(),
        TerminalOutput(),
        TerminalInput(),
        TerminalKill(),
        TodoWrite(),
    ]
