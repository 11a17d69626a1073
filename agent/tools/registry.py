"""The default tool set. Names and argument schemas are a contract: models are trained on
them, and clients and tests rely on them."""

from opencomposer.agent.tools.base import Tool
from opencomposer.agent.tools.files import DeleteFile, MoveFile, ReadFile, WriteFile
from opencomposer.agent.tools.search import Glob, Grep
from opencomposer.agent.tools.todo import TodoWrite


def default_tools() -> list[Tool]:
    return [Grep(), Glob(), ReadFile(), WriteFile(), DeleteFile(), MoveFile(), TodoWrite()]
