"""Fixtures shared with other test folders: the sandbox's (`support.sandbox_fixtures`) and
the raw language-server client's (`support.raw_lsp`)."""

from support.raw_lsp import home, project
from support.sandbox_fixtures import bwrap, outside

__all__ = ["bwrap", "home", "outside", "project"]
