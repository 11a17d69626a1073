"""Which folders a thread may be bound to: inside the folders a transport allows, and never
one whose files would let a turn take over an account or the machine, whatever the allow-list
says. Every transport goes through here (the runtime checks each thread it starts or reopens).

The refused folders are data, each with the reason the error gives: a home folder (a project
inside it is fine), anything in a home's dot folders or its `bin`, the folders on PATH,
the XDG folders, the system's configuration, programs and state (`SYSTEM_FOLDERS`, less the
places people keep work there: `WORK_FOLDERS` and the user's own home), opencomposer's own
folders. A workspace is refused when it is one of them, lies in one (PATH folders and homes
excepted), or holds one. Names are resolved through symlinks and `..` before they come
here; a bind mount, which shows a folder under a second name no path comparison sees through,
is looked through with the mount table: the workspace is judged also by the name its file
system gives it, and by what the mounts inside it show.
"""

import fnmatch
import os
import pwd
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from opencomposer import paths
from opencomposer.agent.mounts import mounted_below, read_mounts, source
from opencomposer.agent.session import SessionError
from opencomposer.config import Settings
from opencomposer.paths import resolved, within


def _text_path(path: str) -> None:
    """Threads record their workspace as text: a path with a lone surrogate (how Python
    spells a name that is not UTF-8, or what a client sent as `"\\udc80"`) cannot be stored,
    shown or sent back."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise SessionError(
            f"workspace {path!r} is not valid UTF-8 text", kind="invalid_request"
        ) from None


def resolved_folder(path: str) -> Path:
    """`path` made absolute with symlinks resolved, as threads record their workspace."""
    _text_path(path)
    try:
        return Path(path).expanduser().resolve()
    except (ValueError, OSError, RuntimeError) as exc:
        # A NUL byte, a name too long for the file system, `~nosuchuser`: not a folder.
        raise SessionError(
            f"workspace {path!r} is not a usable path: {exc}", kind="invalid_request"
        ) from None


def allowed_workspace(path: str, roots: Sequence[Path]) -> Path:
    """The resolved folder `path` names, if it lies inside one of `roots`: a client must not
    be able to point the agent at any folder the server's user can reach. A relative path is
    refused as such: it would name a folder under the server's own working folder, which a
    client neither sees nor chose."""
    _text_path(path)
    if not os.path.isabs(os.path.expanduser(path)):
        raise SessionError(
            f"workspace {path!r} is a relative path: give the folder's absolute path "
            "(the server does not resolve it against its own working folder)",
            kind="invalid_request",
        )
    workspace = resolved_folder(path)
    try:
        is_dir = workspace.is_dir()
    except OSError as exc:
        raise SessionError(
            f"workspace {path!r} is not a usable path: {exc}", kind="invalid_request"
        ) from None
    if not any(workspace.is_relative_to(root.expanduser().resolve()) for root in roots):
        shown = ", ".join(str(root.expanduser()) for root in roots) or "none"
        raise SessionError(
            f"{path} is outside the folders this server may open ({shown}): add a folder "
            "holding it to `workspace_roots` under `[server]` in "
            "~/.config/opencomposer/config.toml and restart the server",
            kind="forbidden",
        )
    if not is_dir:
        raise SessionError(f"workspace {path} is not a folder", kind="invalid_request")
    return workspace


# What a user would expect to refuse, with why. Work is kept in a home, /srv, /opt, /tmp,
# /mnt, /media or a container's /workspace(s): none of those is listed.
SYSTEM_FOLDERS: tuple[tuple[str, str], ...] = (
    ("/etc", "the system's configuration: services, scheduled jobs and logins are set up there"),
    ("/usr", "the installed programs and libraries: what lies there runs for every user"),
    ("/bin", "a folder of system programs: what lies there runs for every user"),
    ("/sbin", "a folder of system programs: what lies there runs for every user"),
    ("/lib", "a folder of system libraries: what lies there is loaded into every program"),
    ("/lib32", "a folder of system libraries: what lies there is loaded into every program"),
    ("/lib64", "a folder of system libraries: what lies there is loaded into every program"),
    ("/libx32", "a folder of system libraries: what lies there is loaded into every program"),
    ("/boot", "the kernel and boot loader: what lies there runs at the next boot"),
    ("/var", "the system's state: scheduled jobs, package databases, mail and logs"),
    ("/root", "the administrator's home folder: its settings and credentials live there"),
    ("/proc", "the kernel's view of processes"),
    ("/sys", "the kernel's settings"),
    ("/dev", "the device files"),
    ("/run", "running services' sockets and state"),
    ("/snap", "the installed snap packages"),
    ("/nix", "the Nix store and profiles: what lies there runs as installed programs"),
)

# Folders inside SYSTEM_FOLDERS where people keep their work: a temporary folder like /tmp,
# web sites (Debian's document root), source code (the FHS's places for it, where the Node
# and Ruby images' `WORKDIR /usr/src/app` puts a container's project). The user's own home
# is one too wherever it is (/var/lib/jenkins, /root for root).
WORK_FOLDERS = ("/var/tmp", "/var/www", "/usr/src", "/usr/local/src")

# Entries of any home folder no workspace may be or lie in, by pattern.
HOME_ENTRIES: tuple[tuple[str, str], ...] = (
    (".*", "a home dot folder: settings, credentials and what runs at login live there"),
    ("bin", "a home bin folder: a login shell puts it on PATH, so what lies there runs"),
)

XDG_FOLDERS: tuple[tuple[str, str], ...] = (
    ("XDG_CONFIG_HOME", "the XDG config folder: programs' settings, user services included"),
    ("XDG_DATA_HOME", "the XDG data folder: programs' data, desktop autostart included"),
    ("XDG_STATE_HOME", "the XDG state folder: programs' history and state"),
)

ON_PATH = "a folder on PATH: a program put there runs whenever its name is typed"


@dataclass(frozen=True)
class Refused:
    """A folder no workspace may be, with the reason the error gives."""

    folder: Path
    """Resolved."""

    name: str
    """How the error shows it (`~/.config`, `/lib`)."""

    reason: str
    """What it is and why it is refused: "a home dot folder: settings ... live there"."""

    inside: bool = True
    """Whether a folder inside it is refused too (not for a home, nor for a PATH folder,
    whose subfolders are not on PATH)."""

    holds: bool = True
    """Whether a folder that holds it is refused too."""

    unless_in: tuple[Path, ...] = ()
    """Folders inside it where a workspace is fine after all (`WORK_FOLDERS`, the home)."""

    def verdict(self, path: Path) -> str | None:
        """Why `path` may not be a workspace under this rule, or None."""
        if path == self.folder:
            return f"{path} is {self.reason}"
        if (
            self.inside
            and within(path, self.folder)
            and not any(within(path, work) for work in self.unless_in)
        ):
            return f"{path} lies in {self.name}, {self.reason}"
        if self.holds and within(self.folder, path):
            return f"{path} holds {self.name}, {self.reason}"
        return None


def refuse_unsafe_workspace(root: Path, settings: Settings) -> None:
    """Refuse a folder no thread may be bound to, whatever the allow-list says: the agent's
    tools write anywhere in a workspace, so one that is, lies in or holds a refused folder
    (`rules`), or lies in a git directory (its hooks and config run code the next time the
    user runs git), would let a single turn take over an account or the machine. `root` is
    resolved."""
    _text_path(str(root))
    git_dir = _git_directory(root)
    if git_dir is not None:
        raise SessionError(
            f"{root} is inside the git directory {git_dir}: open the project folder that holds it",
            kind="forbidden",
        )
    mounts = read_mounts()
    homes = _all_homes()
    refused = rules(settings, homes)
    shown = source(root, mounts)
    why = _verdict(root, refused, homes)
    if why is None and shown != root:
        why = _through(root, shown, _verdict(shown, refused, homes))
    for point, seen in mounted_below(root, mounts):
        why = why or _through(point, seen, _verdict(seen, refused, homes))
    if why is not None:
        raise SessionError(why, kind="forbidden")


def _through(point: Path, seen: Path, why: str | None) -> str | None:
    """`why` said of what the mount at `point` shows (`seen`)."""
    return f"{point} shows {seen} through a mount, and {why}" if why else None


def _verdict(path: Path, refused: list[Refused], homes: dict[Path, str]) -> str | None:
    for home in homes:
        if path != home and within(path, home):
            entry = path.relative_to(home).parts[0]
            for pattern, reason in HOME_ENTRIES:
                if fnmatch.fnmatchcase(entry, pattern):
                    rule = Refused(home / entry, _shown(home / entry, homes), reason)
                    return rule.verdict(path)
    return next((why for rule in refused if (why := rule.verdict(path))), None)


def rules(settings: Settings, homes: dict[Path, str]) -> list[Refused]:
    """The folders no workspace may be on this machine, now, the most telling first: the
    user's homes, opencomposer's own folders, the XDG folders, the system's, the folders on
    PATH, other accounts' homes (often system folders themselves: `bin`'s is /bin)."""
    own = [home for home, owner in homes.items() if not owner]
    reason = "your home folder: open a project folder inside it"
    found = [Refused(home, str(home), reason, inside=False) for home in own]
    found += [*_own_rules(settings), *_xdg_rules()]
    work = [*(resolved(folder) for folder in WORK_FOLDERS), *own]
    for folder, reason in SYSTEM_FOLDERS:
        system = resolved(folder)
        unless = tuple(place for place in work if within(place, system))
        found.append(Refused(system, folder, reason, unless_in=unless))
    found += _path_rules()
    for home, owner in homes.items():
        if owner:
            reason = f"the home folder of {owner}: their settings and credentials live there"
            found.append(Refused(home, str(home), reason, inside=False))
    return found


def _own_rules(settings: Settings) -> Iterator[Refused]:
    data = resolved(str(settings.home.expanduser()))
    yield Refused(data, str(data), "opencomposer's data folder: traces, checkpoints, the token")
    config = resolved(str(paths.user_config_file().parent.expanduser()))
    yield Refused(config, str(config), "opencomposer's config folder: the approval policy")


def _path_rules() -> Iterator[Refused]:
    """The folders on PATH. One inside a workspace is the workspace's own when it is a
    virtual environment's (`.venv/bin`, on PATH while the venv is active): its commands run
    the project's code anyway."""
    for entry in dict.fromkeys(os.environ.get("PATH", "").split(os.pathsep)):
        if os.path.isabs(entry):  # "" and "." name whatever folder a shell is in
            folder = resolved(entry)
            venv = os.path.isfile(os.path.join(folder.parent, "pyvenv.cfg"))
            yield Refused(folder, entry, ON_PATH, inside=False, holds=not venv)


def _xdg_rules() -> Iterator[Refused]:
    for variable, reason in XDG_FOLDERS:
        value = os.environ.get(variable)
        if value and os.path.isabs(value):
            yield Refused(resolved(value), f"${variable}", reason)


def _all_homes() -> dict[Path, str]:
    """Every home folder on this machine, resolved, with its owner's name: "" for the user's
    own (`$HOME` and the password database's, which a server started with another `$HOME`
    must not forget), then every account's (a server running as root can write them all)."""
    homes: dict[Path, str] = {}
    for own in (os.environ.get("HOME"), _password_home()):
        if own and os.path.isabs(own):
            homes[resolved(own)] = ""
    for account in pwd.getpwall():
        # System accounts without a home have `/` or `/nonexistent`: neither is one.
        if (
            os.path.isabs(account.pw_dir)
            and account.pw_dir != "/"
            and os.path.isdir(account.pw_dir)
        ):
            homes.setdefault(resolved(account.pw_dir), account.pw_name)
    return homes


def _password_home() -> str | None:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # a uid without an entry, as in some containers
        return None


def _shown(path: Path, homes: dict[Path, str]) -> str:
    """`path` with the user's home written `~`."""
    for home, owner in homes.items():
        if not owner and within(path, home):
            return str(Path("~") / path.relative_to(home))
    return str(path)


def _git_directory(folder: Path) -> Path | None:
    """`folder` or its ancestor that is a git directory: named `.git`, or shaped like one
    (`HEAD`, `objects/`, `refs/`: how git itself recognises a bare repository or a
    `--separate-git-dir`)."""
    for candidate in (folder, *folder.parents):
        if candidate.name.lower() == ".git" or _git_shaped(candidate):
            return candidate
    return None


def _git_shaped(folder: Path) -> bool:
    try:
        return (
            (folder / "HEAD").is_file()
            and (folder / "objects").is_dir()
            and (folder / "refs").is_dir()
        )
    except PermissionError:  # a folder we may not look into is no repository we could write
        return False
