"""Interpreters tests can run inside a sandbox."""

import sys
from pathlib import Path

# The tests' own venv is invisible inside bubblewrap when it lives under /tmp (the sandbox
# gets a private /tmp, as CI checkouts often do), so fall back to the base interpreter there.
SANDBOX_PYTHON = (
    sys.executable
    if not sys.executable.startswith("/tmp/")
    else str(Path(sys.base_prefix) / "bin" / "python3")
)
