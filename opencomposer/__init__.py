"""opencomposer: an open, self-hostable IDE coding-agent server.

The root package holds only what every subpackage shares (configuration, paths, logging,
secret redaction); it imports nothing from `opencomposer.agent`, `.serving`, `.lsp`,
`.kernels` or `.training`, so any of them may depend on it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("opencomposer")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
