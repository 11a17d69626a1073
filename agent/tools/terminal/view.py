"""What a sandboxed command sees of the host's files (the mounts bubblewrap makes).

The system is read-only and the users' own files are gone: /home, /root and the home folder
wherever it is become empty tmpfs, the home one writable for the length of a command (tools
keep caches there). Shown again read-only from them is what a build needs: the folders on
PATH with the toolchain each belongs to, the Python in use, git's own configuration (git
shows logs with the user's name; its credential stores stay hidden) and what the
`tools.sandbox.expose` setting names. Over all that go the masks: the system's secrets
(password hashes, sudo rules, SSH host keys, TLS and VPN keys, container secrets) and the
credential stores and opencomposer data and config the caller names, wherever they are, the
workspace included.
"""

import glob
import os
import pwd
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

HIDDEN_PLACES = (Path("/home"), Path("/root"))
"""Where users keep their own files, hidden whole (the home folder is added wherever it is)."""

PRIVATE_TMP = Path("/tmp")
"""Each command's own tmpfs (the sandbox's base mounts): as hidden as the homes."""

# Secrets of the system itself, readable by a command that runs as root (shell patterns).
SYSTEM_SECRETS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
    "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
    "/etc/letsencrypt", "/etc/krb5.keytab", "/etc/wireguard", "/etc/ipsec.secrets",
    "/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets", "/etc/NetworkManager/system-connections",
    "/run/secrets", "/var/run/secrets",
)  # fmt: skip
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


@dataclass(frozen=True)
class View:
    hidden: list[Path]
    """Empty tmpfs, outer ones first."""

    shown: list[tuple[Path, Path]]
    """(source, destination) bound read-only over the hidden places."""

    masks: list[Path]
    """Overlaid before the workspace: those outside it, or holding it."""

    masks_inside: list[Path]
    """Overlaid after the workspace is bound: those inside it."""

    def before_workspace(self) -> list[str]:
        args: list[str] = []
        for path in self.hidden:
            args += ["--tmpfs", str(path)]
        for source, destination in self.shown:
            args += ["--ro-bind-try", str(source), str(destination)]
        return args + _mask_arguments(self.masks)

    def after_workspace(self) -> list[str]:
        return _mask_arguments(self.masks_inside)


def view(workspace: Path, masked: Iterable[Path], expose: Sequence[Path] = ()) -> View:
    """The view of a command run in `workspace`, with the user's home as it is now."""
    home = Path.home()
    hidden = _hidden_places(home)
    concealed = [*hidden, PRIVATE_TMP]
    shown = _shown(_wanted(home, expose), concealed, workspace)
    visible = [destination for _, destination in shown]
    masks, inside = [], []
    for path in dict.fromkeys([*_system_secrets(), *(_real(path) for path in masked)]):
        if not os.path.lexists(path):
            continue
        if path != workspace and path.is_relative_to(workspace):
            inside.append(path)
        elif _visible(path, concealed, visible):
            masks.append(path)
    return View(hidden, shown, masks, inside)


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
        and folder.parent not in (home, *HIDDEN_PLACES)
        and not any(folder.parent == home / name for name in _NEVER_WHOLE)
    ):
        root = folder.parent
    relative = root.relative_to(home).as_posix() if root.is_relative_to(home) else None
    return [root, *(home / name for name in _COMPANIONS.get(relative or "", ()))]


def _shown(
    wanted: Iterable[Path], concealed: list[Path], workspace: Path
) -> list[tuple[Path, Path]]:
    """Binds for what lies in a hidden place: at the real path, and at the path as named when
    that is a symlink in a hidden place (~/.gitconfig -> ~/dotfiles/gitconfig)."""
    binds: dict[Path, Path] = {}
    for path in wanted:
        if not os.path.exists(path):
            continue
        real = _real(path)
        for destination in dict.fromkeys((real, path)):
            if _in_any(destination, concealed) and not destination.is_relative_to(workspace):
                binds.setdefault(destination, real)
    kept: list[tuple[Path, Path]] = []
    for destination in sorted(binds):
        if not any(destination.is_relative_to(outer) for _, outer in kept):
            kept.append((binds[destination], destination))
    return kept


def _visible(path: Path, concealed: list[Path], shown: list[Path]) -> bool:
    """Whether a command could see `path` but for its mask (a mask holding the workspace
    in a hidden place is not needed: the workspace's bind shows only the workspace)."""
    return not _in_any(path, concealed) or _in_any(path, shown)


def _real(path: Path) -> Path:
    """Symlinks followed; a loop is no error (Path.resolve() raises on one)."""
    return Path(os.path.realpath(path))


def _in_any(path: Path, folders: Iterable[Path]) -> bool:
    return any(path.is_relative_to(folder) for folder in folders)


def _system_secrets() -> list[Path]:
    return [Path(match) for pattern in SYSTEM_SECRETS for match in sorted(glob.glob(pattern))]


def _mask_arguments(paths: Iterable[Path]) -> list[str]:
    """Folders get an empty tmpfs, files /dev/null. /dev/null must be mounted with
    --dev-bind: --ro-bind mounts are nodev, so reading the mask would fail with EACCES, and
    tools that read their config (npm and ~/.npmrc) would break instead of seeing it empty.
    Writes to a masked file vanish, leaving the real one untouched."""
    args: list[str] = []
    for path in paths:
        args += ["--tmpfs", str(path)] if path.is_dir() else ["--dev-bind", "/dev/null", str(path)]
    return args
