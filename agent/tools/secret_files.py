"""The workspace's secret files (`.env` and `.env.*`, at any depth) and the watch that keeps a
thread's redactor knowing what they hold.

Every value in them counts, not only secret-named ones: .env files exist to hold what must
not be committed. Only values that are plainly configuration are left (numbers, booleans,
paths and URLs without credentials, `localhost`, `production`): a masked common word would
break the model's every edit of a file containing it. A multi-line value is also masked
line by line, as `read_file` and `grep` show it.

The files are found by walking the workspace, not through its ignore rules (.env files are
usually ignored), skipping version-control folders and installed dependencies, with a bound
on folders. Kept fresh cheaply: a refresh stats the files found and the folders walked, and
re-reads a file or re-lists a folder only when its mtime moved.
"""

import logging
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opencomposer.agent.tools.terminal.environment import is_secret_name
from opencomposer.redact import (
    MIN_SECRET_LENGTH,
    Redactor,
    looks_like_credential,
    looks_random,
    url_credentials,
)

log = logging.getLogger(__name__)

# Folders never walked: version control, and dependencies installed by a package manager
# (third-party files, and by far the most folders of a JavaScript or Python project).
SKIPPED_FOLDERS = frozenset({
    ".git", ".hg", ".svn", ".jj", "node_modules", "__pycache__", ".venv", "venv", ".tox",
    ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
})  # fmt: skip
# Folders a walk visits at most. Measured on 2,041 folders: a first walk 23 µs a folder, a
# sweep for changes 3.6 µs (a stat each), so 20,000 folders cost 0.45 s once and 70 ms a
# sweep (five times that on two busy shared cores). A larger workspace (a home folder) is
# watched in its first 20,000 folders only.
MAX_FOLDERS = 20_000
# A .env file larger than this is not configuration; it is not read.
MAX_DOTENV_BYTES = 1024 * 1024
# Seconds between two unforced refreshes (events ask for them; the known files are stat'ed).
REFRESH_INTERVAL = 0.5
# An unforced refresh sweeps the folders only when the last sweep is this many times its own
# cost ago: sweeping a large workspace takes at most 1/20 of the time.
SWEEP_SPACING = 20

_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*(.*)$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}
# Values that are configuration, not secrets, though long enough to mask.
_PLAIN_WORDS = frozenset({
    "development", "production", "localhost", "critical", "disabled", "postgres",
    "postgresql", "database", "verbose", "staging", "testing",
})  # fmt: skip
_PLAIN_VALUE = re.compile(
    r"[+-]?\d+(?:\.\d+)?"  # numbers
    r"|(?i:true|false|yes|no|on|off|null|none)"
    r"|[\w.\-]+:\d{1,5}"  # host:port
    r"|[a-z0-9\-]+(?:\.[a-z0-9\-]+)+"  # host names, versions
)
# A secret file named anywhere in a tool call's arguments (a path, a command, a patch).
_NAMED_IN_TEXT = re.compile(
    r"(?:^|[\s/\\\"'=:(])\.env(?:\.[\w.\-]+)?(?=$|[\s\"';:)|&>,])", re.MULTILINE
)
# A variable's name, not its value (`DATABASE_URL` in an edit's search text).
_VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# `NAME=value` anywhere in a text (a shell command writing a .env, a patch's added lines).
_INLINE_ASSIGNMENT = re.compile(
    r"""(?<![\w$])[A-Za-z_][A-Za-z0-9_]*=("(?:\\.|[^"\\\n])*"|'[^'\n]*'|[^\s"'`;|&<>()]+)"""
)


def is_secret_file(path: Path | str) -> bool:
    name = Path(path).name
    return name == ".env" or name.startswith(".env.")


def names_secret_file(arguments: Any) -> bool:
    """Whether some string in a tool call's arguments names a secret file (a path, a
    command, a patch)."""
    return any(_NAMED_IN_TEXT.search(text) for text in _strings(arguments))


@dataclass(frozen=True)
class Assignment:
    name: str
    value: str
    """As a program reading the file sees it (quotes removed, escapes decoded)."""

    written: str
    """As the file shows it between the quotes."""


def _quoted(rest: str, lines: list[str]) -> tuple[str, str]:
    """(value, written) of a quoted value starting at rest[0]; a value may continue on the
    following lines, which are consumed from `lines`."""
    quote, text, index = rest[0], rest[1:], 0
    value: list[str] = []
    while True:
        if index + 1 >= len(text) and lines and text[index:] in ("", "\\"):
            text += "\n" + lines.pop(0)  # the value goes on: read the next line
        if index >= len(text) or text[index] == quote:
            break  # the closing quote, or none in the rest of the file
        char = text[index]
        following = text[index + 1 : index + 2]
        if char == "\\" and following and (quote == '"' or following == quote):
            # Escapes in double quotes; `\'` inside single quotes (python-dotenv's rules).
            value.append(_ESCAPES.get(following, "\\" + following) if quote == '"' else following)
            index += 2
            continue
        value.append(char)
        index += 1
    return "".join(value), text[:index]


def dotenv_assignments(text: str) -> list[Assignment]:
    """Every `KEY=value` of a .env file in order, as python-dotenv reads them: `export `,
    comments, single, double and back quotes, escapes in double quotes (`\\"`, `\\n`), values
    continued over lines inside quotes, CRLF line ends."""
    assignments = []
    lines = text.splitlines()
    while lines:
        match = _ASSIGNMENT.match(lines.pop(0))
        if match is None:
            continue
        rest = match.group(2).lstrip()
        if rest[:1] in ("'", '"', "`"):
            value, written = _quoted(rest, lines)
        else:
            value = written = re.split(r"\s+#", rest, maxsplit=1)[0].strip()
        assignments.append(Assignment(match.group(1), value, written))
    return assignments


def parse_dotenv(text: str) -> dict[str, str]:
    """The variables a .env file sets (a later assignment wins)."""
    return {a.name: a.value for a in dotenv_assignments(text)}


def _plain(name: str, value: str) -> bool:
    """A value that is configuration, not a secret (see the module docstring)."""
    if is_secret_name(name) or looks_like_credential(value):
        return False
    if value.lower() in _PLAIN_WORDS or _PLAIN_VALUE.fullmatch(value):
        return True
    if any(c.isspace() for c in value) or not (
        "://" in value or value.startswith(("/", "./", "../", "~/"))
    ):
        return False
    # A URL or a path: plain unless a part of it is a key (a webhook URL, `?token=...`).
    return not url_credentials(value) and not any(
        looks_random(part) for part in re.split(r"[/?&=#:@]", value)
    )


def secret_values(assignments: Iterable[Assignment]) -> list[str]:
    """What to mask for these assignments: each value that is not plain, as read and as
    written, and each line of a multi-line one (PEM armour lines excepted: they are the same
    in every key)."""
    found: list[str] = []
    for assignment in assignments:
        if len(assignment.value) < MIN_SECRET_LENGTH or _plain(assignment.name, assignment.value):
            continue
        for form in dict.fromkeys((assignment.value, assignment.written)):
            found.append(form)
            if "\n" in form:
                found += [
                    line.strip()
                    for line in form.splitlines()
                    if not line.strip().startswith("-----")
                ]
    return [value for value in dict.fromkeys(found) if len(value) >= MIN_SECRET_LENGTH]


def dotenv_secret_values(root: Path) -> list[str]:
    """The values to mask of every secret file in the workspace, as of now."""
    watch = SecretFiles(root, Redactor())
    watch.refresh(force=True)
    return list(watch.values)


def call_secret_values(arguments: Any) -> list[str]:
    """What to mask of a tool call's arguments before it runs. In the arguments of a call
    that names a secret file: every `NAME=value`, and every other one-line argument that does
    not name the file itself (an edit's replacement text), unless plainly not a secret."""
    if not names_secret_file(arguments):
        return []
    strings = list(_strings(arguments))
    assignments = []
    for text in strings:
        if (
            "\n" not in text
            and "=" not in text
            and not _NAMED_IN_TEXT.search(text)
            and not _VARIABLE_NAME.fullmatch(text.strip())
        ):
            assignments.append(Assignment("", text.strip(), text.strip()))
        assignments += dotenv_assignments(re.sub(r"(?m)^[+\-]", "", text))
        for match in _INLINE_ASSIGNMENT.finditer(text):
            # `printf 'KEY=value\n'`: the value without the escape the shell expands
            assignments += dotenv_assignments(re.sub(r"(\\[nrt])+'?$", "", match.group(0)))
    return secret_values(assignments)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _read_small(path: str, limit: int) -> bytes | None:
    """A regular file's bytes when it has at most `limit` (a symlink to one is followed, as
    dotenv loaders do); judged on the opened descriptor, so a command cannot swap in a FIFO
    (which would block) or a huge file between a check and the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        try:
            data = handle.read(limit + 1)
        except OSError:
            return None
    return data if len(data) <= limit else None


def _stat(path: Path | str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


class SecretFiles:
    """The secret files of one workspace, feeding what they hold to a thread's redactor."""

    def __init__(self, root: Path, redactor: Redactor) -> None:
        self.root = root
        self.redactor = redactor
        self.values: list[str] = []
        """Every value registered so far, in order (a value stays masked after its file
        changes or goes: it may still be in the thread's history)."""

        self._files: dict[str, tuple[int, int, int]] = {}  # path -> (mtime_ns, size, inode)
        self._folders: dict[str, int] = {}  # path -> mtime_ns when listed
        self._last = float("-inf")
        self._swept = float("-inf")
        self._sweep_cost = 0.0
        self._bounded = False

    @property
    def files(self) -> list[Path]:
        return [Path(path) for path in self._files]

    def refresh(self, *, force: bool = False) -> None:
        """Read what changed since the last refresh: the files known, and new ones in the
        folders whose mtime moved. Without `force`, at most every REFRESH_INTERVAL seconds,
        and the folders only as often as SWEEP_SPACING allows."""
        now = time.monotonic()
        if not force and now - self._last < REFRESH_INTERVAL:
            return
        self._last = now
        if force or now - self._swept >= SWEEP_SPACING * self._sweep_cost:
            self._sweep()
            self._swept = time.monotonic()
            self._sweep_cost = self._swept - now
        for path in list(self._files):
            self._read(path)

    def note_call(self, arguments: Any) -> None:
        """Learn the values a tool call is about to write into a secret file (its arguments
        go out in events before the file exists): `call_secret_values`."""
        self._learn(call_secret_values(arguments))

    def _sweep(self) -> None:
        if not self._folders:
            self._walk([str(self.root)])
            return
        moved = [
            folder
            for folder, mtime in self._folders.items()
            if (st := _stat(folder)) is None or st.st_mtime_ns != mtime
        ]
        if moved:
            self._walk(moved)

    def _walk(self, folders: list[str]) -> None:
        """List `folders` (and folders found in them, recursively) for secret files."""
        pending = list(folders)
        while pending:
            folder = pending.pop()
            if folder not in self._folders and len(self._folders) >= MAX_FOLDERS:
                if not self._bounded:
                    self._bounded = True
                    log.warning(
                        "the workspace has more than %d folders; .env files beyond "
                        "them are not watched",
                        MAX_FOLDERS,
                        extra={"workspace": str(self.root)},
                    )
                continue
            try:
                mtime = os.stat(folder).st_mtime_ns
                entries = list(os.scandir(folder))
            except OSError:
                self._folders.pop(folder, None)
                continue
            self._folders[folder] = mtime
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIPPED_FOLDERS and entry.path not in self._folders:
                            pending.append(entry.path)
                    elif is_secret_file(entry.name) and entry.path not in self._files:
                        self._files[entry.path] = (-1, -1, -1)
                except OSError:
                    continue

    def _read(self, path: str) -> None:
        st = _stat(path)
        if st is None:
            self._files.pop(path)
            return
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._files[path] == signature:
            return
        self._files[path] = signature
        data = _read_small(path, MAX_DOTENV_BYTES)
        if data is not None:
            self._learn(secret_values(dotenv_assignments(data.decode("utf-8", "replace"))))

    def _learn(self, values: list[str]) -> None:
        for value in values:
            if self.redactor.add(value):
                self.values.append(value)
