"""Which folders a thread may be bound to: inside the folders a transport allows, and never
one whose files would let a turn take over the user's account, whatever the allow-list says.
Every transport goes through here (the runtime checks each thread it starts or reopens)."""

import os
import pwd
from collections.abc import Sequence
from pathlib import Path

from opencomposer import paths
from opencomposer.agent.session import SessionError
from opencomposer.config import Settings


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
    be able to point the agent at any folder the server's user can reach."""
    workspace = resolved_folder(path)
    try:
        is_dir = workspace.is_dir()
    except OSError as exc:
        raise SessionError(
            f"workspace {path!r} is not a usable path: {exc}", kind="invalid_request"
        ) from None
    if not any(workspace.is_relative_to(root.expanduser().resolve()) for root in roots):
        raise SessionError(f"{path} is outside the folders this server may open", kind="forbidden")
    if not is_dir:
        raise SessionError(f"workspace {path} is not a folder", kind="invalid_request")
    return workspace


def _homes() -> set[Path]:
    """The user's home folder as `$HOME` and as the password database say (a server started
    with another `$HOME` must not forget the real one)."""
    found = set()
    for home in (os.environ.get("HOME"), _password_home()):
        if home:
            found.add(Path(home).resolve())
    return found


def _password_home() -> str | None:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # a uid without an entry, as in some containers
        return None


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


def refuse_unsafe_workspace(root: Path, settings: Settings) -> None:
    """Refuse a folder no thread may be bound to, whatever the allow-list says: the agent's
    tools write anywhere in a workspace, so one that is the home folder or contains it
    (`~/.bashrc`, `~/.ssh`; `/` included), a git directory or a folder inside one (its hooks
    and config run code the next time the user runs git), or one that holds, or lies in,
    opencomposer's own data or config (the trace store, the server token, the approval
    policy) would let a single turn take over the user's account. `root` is resolved."""
    _text_path(str(root))
    for home in _homes():
        if home.is_relative_to(root):
            where = "your home folder" if home == root else f"above your home folder {home}"
            raise SessionError(
                f"{root} is {where}: open a project folder inside it", kind="forbidden"
            )
    git_dir = _git_directory(root)
    if git_dir is not None:
        raise SessionError(
            f"{root} is inside the git directory {git_dir}: open the project folder that holds it",
            kind="forbidden",
        )
    for own in (settings.home, paths.user_config_file().parent):
        own = own.expanduser().resolve()
        if own.is_relative_to(root) or root.is_relative_to(own):
            raise SessionError(
                f"{root} holds or lies in opencomposer's own folder {own}", kind="forbidden"
            )
