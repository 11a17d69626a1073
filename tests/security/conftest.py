"""Fixtures shared with other test folders: the sandbox's, a workspace with its harness, the
raw language-server client's and the secret tests' runtimes (all in `support`)."""

from support.harness_fixtures import harness, root
from support.pieces import runtimes
from support.raw_lsp import home, project
from support.sandbox_fixtures import bwrap, outside

__all__ = ["bwrap", "harness", "home", "outside", "project", "root", "runtimes"]
