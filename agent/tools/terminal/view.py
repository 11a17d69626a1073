"""What a sandboxed command sees of the host's files (the mounts bubblewrap makes).

Two views. `host`: the host's root read-only, minus what is private. `system`: an allow-list,
only the installed system (/usr, /etc, /bin, /sbin, /lib*), for runs that must see nothing of
the host's data (benchmark trials, whose answers lie somewhere on the host). In both, the users'
own files are gone: /home, /root and the home folder wherever it is become empty tmpfs, the
home one writable for the length of a command (tools keep caches there). Shown again
read-only is what a build needs: the folders on PATH with the toolchain each belongs to, the
Python in use, git's own configuration (git shows logs with the user's name; its credential
stores stay hidden) and what the `tools.sandbox.expose` setting names.

What running services listen on is hidden by rule: /run (and a /var/run of its own) is an
empty tmpfs, given back only the files toolchains read there (resolv.conf's target), and
every unix socket in the system's configuration and state folders is masked. Over all that go
the masks: what the system keeps from other users in those folders (anything without read
permission for others: password hashes, sudo rules, SSH host keys, TLS and VPN keys, database
folders, whatever a package adds), and the credential stores and opencomposer data and config
the caller names, wherever they are, the workspace included.
"""

import ipaddress
import logging
import os
import pwd
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

ViewName = Literal["host", "system"]

HIDDEN_PLACES = (Path("/home"), Path("/root"))
"""Where users keep their own files, hidden whole (the home folder is added wherever it is)."""

PRIVATE_TMP = Path("/tmp")
"""Each command's own tmpfs: as hidden as the homes (the system view empties /var/tmp too)."""

SYSTEM_ROOTS = tuple(
    Path(path) for path in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
)
"""All the `system` view shows of the host besides toolchains: the installed system and its
configuration (on merged-/usr systems /bin, /sbin and /lib* are links into /usr)."""

RUNTIME_ROOTS = (Path("/run"), Path("/var/run"))
"""Where running services keep their sockets and state (the Docker daemon, D-Bus, databases,
agents): empty in every view."""

CONFIG_ROOTS = (Path("/etc"), Path("/var"), Path("/boot"), Path("/usr/local/etc"))
"""The system's configuration and state, searched for what it keeps private."""

# Folders the search for private entries visits at most. Measured here: /etc and /var hold
# 311 folders and 6,000 entries; a first search takes 0.3 s on a busy machine, a refresh
# (a stat per folder) about 1 ms. A larger tree is searched in its first 20,000 folders.
MAX_FOLDERS = 20_000

# What git reads from the home folder besides credentials: the user's name and email,
# aliases, ignore rules. ~/.config/git/credentials is masked with the other credentials.
GIT_CONFIG = (".gitconfig", ".config/git")
# A PATH folder with one of these names belongs to the folder above it (a toolchain keeps
# its libraries beside its bin/: ~/.cargo, ~/.pyenv, ~/go, ~/.nvm/versions/node/v20).
_TOOLCHAIN_BINS = ("bin", "shims")
# Home-relative folders a toolchain needs beside its own: rustup's proxies in ~/.cargo/bin
# run toolchains from ~/.rustup; `pip install --user` puts scripts in ~/.local/bin and their
# packages in ~/.local/lib; pipx links ~/.local/bin to its venvs. ~/.local itself holds
# every desktop program's data, so it is never shown whole.
_COMPANIONS = {
    ".cargo": (".rustup",),
    ".local/bin": (".local/lib", ".local/share/pipx", ".local/pipx"),
}
_NEVER_WHOLE = (".local",)

RESOLV_CONF = Path("/etc/resolv.conf")


@dataclass(frozen=True)
class View:
    root: list[str]
    """bwrap arguments for the root: the host's or the system's folders, /dev, /proc, the
    private temporary folders, the emptied runtime folders."""

    read_only_root: bool
    """The root is bwrap's own tmpfs (entries bound one by one): remount it read-only once
    every mount point is made."""

    hidden: list[Path]
    """Empty tmpfs, outer ones first."""

    shown: list[tuple[Path, Path]]
    """(source, destination) bound read-only over the hidden places."""

    masks: list[Path]
    """Overlaid before the workspace: those outside it, or holding it."""

    masks_inside: list[Path]
    """Overlaid after the workspace is bound: those inside it."""

    def before_workspace(self) -> list[str]:
        args = list(self.root)
        for path in self.hidden:
            args += ["--tmpfs", str(path)]
        for source, destination in self.shown:
            args += ["--ro-bind-try", str(source), str(destination)]
        return args + _mask_arguments(self.masks)

    def after_workspace(self) -> list[str]:
        return _mask_arguments(self.masks_inside)


def view(
    workspace: Path,
    masked: Iterable[Path],
    expose: Sequence[Path] = (),
    *,
    name: ViewName = "host",
    by_entry: bool = False,
) -> View:
    """The view of a command run in `workspace`, with the user's home as it is now.
    `by_entry`: the host's root is bound entry by entry (so that mounts can be made at any
    top-level path); the system view always is."""
    home = Path.home()
    hidden = _hidden_places(home)
    if name == "system":
        root, read_only_root = _system_root(), True
        outside: Callable[[Path], bool] = _outside_system
    else:
        root, read_only_root = _host_root(by_entry), by_entry
        outside = _nowhere
    concealed = [*hidden, PRIVATE_TMP, *RUNTIME_ROOTS]

    def unseen(path: Path) -> bool:
        return outside(path) or _in_any(path, concealed)

    shown = _shown(_wanted(home, expose), unseen, workspace)
    visible = [destination for _, destination in shown]
    masks, inside = [], []
    for path in dict.fromkeys([*PRIVATE_ENTRIES.find(), *(_real(path) for path in masked)]):
        if not os.path.lexists(path):
            continue
        if path != workspace and path.is_relative_to(workspace):
            inside.append(path)
        elif not unseen(path) or _in_any(path, visible):
            masks.append(path)
    return View([*root, *_runtime()], read_only_root, hidden, shown, masks, inside)


_BASE = ["--dev", "/dev", "--proc", "/proc", "--tmpfs", str(PRIVATE_TMP)]


def _host_root(by_entry: bool) -> list[str]:
    if not by_entry:
        return ["--ro-bind", "/", "/", *_BASE]
    args: list[str] = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        path = f"/{entry.name}"
        if path in ("/dev", "/proc", "/tmp", "/run"):
            continue  # each its own mount below
        if entry.is_symlink():
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind-try", path, path]
    return [*args, *_BASE]


def _system_root() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_ROOTS:
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return [*args, *_BASE, "--tmpfs", "/var/tmp"]


def _runtime() -> list[str]:
    """The runtime folders emptied, then what toolchains read there given back: the resolver
    configuration, when /etc/resolv.conf links into /run (systemd-resolved, resolvconf)."""
    args: list[str] = []
    for folder in RUNTIME_ROOTS:
        if folder.is_dir() and not folder.is_symlink():
            args += ["--tmpfs", str(folder)]
    target = _real(RESOLV_CONF)
    if target != RESOLV_CONF and _in_any(target, RUNTIME_ROOTS) and target.is_file():
        args += ["--ro-bind", str(target), str(target)]
    return args


def resolver_is_loopback() -> bool:
    """Whether this machine's DNS resolver listens on loopback (systemd-resolved's
    127.0.0.53): a command in a network namespace of its own cannot reach it there."""
    try:
        lines = RESOLV_CONF.read_text(errors="replace").splitlines()
    except OSError:
        return False
    servers = [line.split()[1] for line in lines if line.split()[:1] == ["nameserver"]]
    try:
        return bool(servers) and all(ipaddress.ip_address(s).is_loopback for s in servers)
    except ValueError:
        return False


def _nowhere(path: Path) -> bool:
    return False


def _outside_system(path: Path) -> bool:
    return not _in_any(_real(path) if path.is_symlink() else path, SYSTEM_ROOTS)


def _hidden_places(home: Path) -> list[Path]:
    places = list(HIDDEN_PLACES)
    for folder in (home, Path(pwd.getpwuid(os.getuid()).pw_dir)):
        if folder != Path("/"):
            places.append(folder)
    found = [_real(path) for path in places if path.is_dir()]
    # /tmp is already a private tmpfs; a home under it still gets one, so that $HOME exists.
    return sorted(dict.fromkeys(found), key=lambda path: len(path.parts))


def _wanted(home: Path, expose: Sequence[Path]) -> list[Path]:
    """Everything to show where it lies in a hidden place (absolute, not resolved)."""
    wanted: list[Path] = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if os.path.isabs(entry):  # a relative entry is the command's own folder
            wanted += _toolchain(Path(os.path.normpath(entry)), home)
    wanted += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    wanted += [home / name for name in GIT_CONFIG]
    wanted += [Path(os.path.normpath(Path(path).expanduser())) for path in expose]
    return wanted


def _toolchain(folder: Path, home: Path) -> list[Path]:
    """A PATH folder and what its programs need beside it."""
    root = folder
    if (
        folder.name in _TOOLCHAIN_BINS
        and folder.parent not in (home, Path("/"), *HIDDEN_PLACES)
        and not any(folder.parent == home / name for name in _NEVER_WHOLE)
    ):
        root = folder.parent
    relative = root.relative_to(home).as_posix() if root.is_relative_to(home) else None
    return [root, *(home / name for name in _COMPANIONS.get(relative or "", ()))]


def _shown(
    wanted: Iterable[Path], unseen: Callable[[Path], bool], workspace: Path
) -> list[tuple[Path, Path]]:
    """Binds for what lies in an unseen place: at the real path, and at the path as named when
    that is a symlink in an unseen place (~/.gitconfig -> ~/dotfiles/gitconfig)."""
    binds: dict[Path, Path] = {}
    for path in wanted:
        if not os.path.exists(path):
            continue
        real = _real(path)
        for destination in dict.fromkeys((real, path)):
            if unseen(destination) and not destination.is_relative_to(workspace):
                binds.setdefault(destination, real)
    kept: list[tuple[Path, Path]] = []
    for destination in sorted(binds):
        if not any(destination.is_relative_to(outer) for _, outer in kept):
            kept.append((binds[destination], destination))
    return kept


def _real(path: Path) -> Path:
    """Symlinks followed; a loop is no error (Path.resolve() raises on one)."""
    return Path(os.path.realpath(path))


def _in_any(path: Path, folders: Iterable[Path]) -> bool:
    """`path.is_relative_to(folder)` for any folder, on strings: asked a few thousand times
    per command, pathlib's parsing of each pair was a third of the view's cost."""
    text = str(path)
    return any(
        text == (f := str(folder)) or text.startswith(f.rstrip("/") + "/") for folder in folders
    )


class PrivateEntries:
    """What the system keeps to itself in its configuration and state folders, found by rule
    rather than by a list of known names: every entry others may not read (a non-empty file
    without read permission for others, a folder without read or search permission for them; a
    folder found private is not entered), and every unix socket (a door into a running
    service). Shared temporary folders (world-writable and sticky, /var/tmp) hold the users'
    files, not the system's, and are not searched. What a package or an administrator adds
    tomorrow is covered the same way.

    The folders are searched once, then only folders whose mtime moved are listed again. A
    file made private in place (chmod) is seen once its folder changes or the process
    restarts: it was readable by everyone until then anyway.
    """

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = roots
        self._folders: dict[str, tuple[int, list[str], list[str]]] = {}
        """Folder -> (its mtime, its private entries, its subfolders to search)."""
        self._lock = threading.Lock()

    def find(self) -> list[Path]:
        with self._lock:
            found: list[str] = []
            pending = [str(root) for root in self.roots if root.is_dir() and not root.is_symlink()]
            searched: set[str] = set()
            while pending and len(searched) < MAX_FOLDERS:
                folder = pending.pop()
                try:
                    mtime = os.lstat(folder).st_mtime_ns
                except OSError:
                    continue
                known = self._folders.get(folder)
                if known is None or known[0] != mtime:
                    known = (mtime, *_private_in(folder))
                    self._folders[folder] = known
                searched.add(folder)
                found += known[1]
                pending += known[2]
            if pending:
                log.warning("searched only %d folders for private system files", MAX_FOLDERS)
            for folder in self._folders.keys() - searched:
                del self._folders[folder]
            return [Path(path) for path in found]


def _private_in(folder: str) -> tuple[list[str], list[str]]:
    """A folder's private entries and its other subfolders (links are not followed)."""
    private, subfolders = [], []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return [], []
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            continue
        if stat.S_ISDIR(mode):
            if not (mode & stat.S_IROTH and mode & stat.S_IXOTH):
                private.append(entry.path)
            elif not (mode & stat.S_ISVTX and mode & stat.S_IWOTH):
                subfolders.append(entry.path)
            # else: a shared temporary folder (/var/tmp): the users' files, not the system's
        elif stat.S_ISSOCK(mode) or not (mode & stat.S_IROTH or _empty(entry)):
            private.append(entry.path)
    return private, subfolders


def _empty(entry: os.DirEntry[str]) -> bool:
    """An empty regular file (a lock file, most often) has nothing to keep: not masked, which
    saves its mount (a mount costs bubblewrap about 0.3 ms)."""
    try:
        details = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(details.st_mode) and details.st_size == 0


PRIVATE_ENTRIES = PrivateEntries(CONFIG_ROOTS)


def _mask_arguments(paths: Iterable[Path]) -> list[str]:
    """Folders get an empty tmpfs, files /dev/null. /dev/null must be mounted with
    --dev-bind: --ro-bind mounts are nodev, so reading the mask would fail with EACCES, and
    tools that read their config (npm and ~/.npmrc) would break instead of seeing it empty.
    Writes to a masked file vanish, leaving the real one untouched."""
    args: list[str] = []
    for path in paths:
        args += ["--tmpfs", str(path)] if path.is_dir() else ["--dev-bind", "/dev/null", str(path)]
    return args
