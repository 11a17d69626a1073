"""Git config, read the way git reads it: which files and hooks folder a repository's config
names (for the guard to bind them read-only), and which keys of a config a command wrote
may stay (for the guard to rewrite it with those only).

Git parses, we never do: `git config --list` runs no hook, fsmonitor, pager or any other
program, whatever the config says. Writing is ours, as a config of quoted values is a few
lines, read back by git in the tests.

Keeping keys is an allow-list, not a deny-list: git keeps adding keys that run programs
(core.hooksPath in 2.9, core.fsmonitor in 2.16, besides the alias, pager, editor, diff,
merge, filter, credential, gpg, ssh and transport families), and a key a deny-list misses is
code on the host, while a harmless key dropped costs a setting in a repository a command made
for itself.
"""

import fnmatch
import functools
import os
import selectors
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.tools.terminal.git_scan import Repository, common_dir

# Seconds for `git config` to list a repository's configuration (it takes about 3 ms).
_GIT_TIMEOUT = 10.0
# Most of `git config --list --includes` read: a user's listing is a few KiB, while a
# command's config that includes one 200 KB file 500 times lists 295 MB (measured).
_MAX_LISTING_BYTES = 4 * 1024 * 1024
# Variables that would make `git config` read another repository than the one named.
_GIT_LOCATION = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
)  # fmt: skip

# Keys a config keeps: repository format and layout, line endings, identity, and where
# remotes and branches point. Nothing here names a program or another file git reads.
SAFE_KEYS = (
    "core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
    "core.ignorecase", "core.precomposeunicode", "core.symlinks", "core.autocrlf",
    "core.eol", "core.safecrlf", "core.quotepath", "core.sparsecheckout",
    "core.sparsecheckoutcone", "extensions.*", "user.name", "user.email",
    "remote.*.url", "remote.*.pushurl", "remote.*.fetch", "branch.*.remote",
    "branch.*.merge", "submodule.*.url", "submodule.*.active",
)  # fmt: skip
# In a URL, `helper::address` runs the program git-remote-<helper> (ext:: runs anything).
_TRANSPORT_HELPER = "::"


@dataclass(frozen=True)
class ConfigFacts:
    files: tuple[Path, ...]
    """Every config file git reads for the repository, included ones too (even when
    missing or empty: a command could fill them)."""

    hooks: Path | None
    """core.hooksPath, absolute; None when unset."""


def config_facts(repo: Repository) -> ConfigFacts | None:
    """The config files and hooks folder of a repository, by asking git to list its config
    (`git config` runs no hook, fsmonitor or other program); None when git is missing or
    rejects the config, in which case the user's git fails on it too. Cached until a file
    it read changes."""
    cached = _facts_cache.get(repo)
    if cached is not None and cached[0] == _signature(cached[1].files, repo):
        return cached[1]
    facts = _list_config(repo)
    if facts is not None:
        if len(_facts_cache) >= _FACTS_CACHED:
            _facts_cache.clear()
        _facts_cache[repo] = (_signature(facts.files, repo), facts)
    return facts


# Repositories whose config facts are kept; many rollouts in one process each have a few.
_FACTS_CACHED = 1024
_facts_cache: dict[Repository, tuple[tuple[object, ...], ConfigFacts]] = {}


def _signature(files: Iterable[Path], repo: Repository) -> tuple[object, ...]:
    """What changes when any config git reads for `repo` may have: the files, and where git
    looks for the user's and system's."""
    base = [repo.gitdir / "config", repo.gitdir / "config.worktree", repo.gitdir / "commondir"]
    common = common_dir(repo.gitdir)
    if common is not None:
        base.append(common / "config")
    env = tuple(
        os.environ.get(name)
        for name in (
            "HOME",
            "XDG_CONFIG_HOME",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_SYSTEM",
            "GIT_CONFIG_NOSYSTEM",
        )
    )
    return env, tuple(_stamp(path) for path in (*base, *files))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_ctime_ns, info.st_size


def _list_config(repo: Repository) -> ConfigFacts | None:
    git = git_program()
    if git is None:
        return None
    env = {name: value for name, value in os.environ.items() if name not in _GIT_LOCATION}
    argv = [git, "--git-dir", str(repo.gitdir), "config", "--list", "--show-origin"]
    listed = _bounded_output([*argv, "--includes", "-z"], repo.worktree, env)
    if listed is None:
        return None
    files: dict[Path, None] = {}
    hooks: Path | None = None
    for origin, key, value in _records(listed.decode("utf-8", errors="replace")):
        if not origin.startswith("file:"):
            continue
        source = Path(os.path.normpath(origin.removeprefix("file:")))
        files[source] = None
        if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            files[Path(os.path.normpath(source.parent / os.path.expanduser(value)))] = None
        elif key == "core.hookspath":
            hooks = Path(os.path.normpath(repo.worktree / os.path.expanduser(value)))
    return ConfigFacts(tuple(files), hooks)


def _bounded_output(argv: list[str], cwd: Path, env: dict[str, str]) -> bytes | None:
    """The program's output; None when it fails, takes longer than _GIT_TIMEOUT or prints
    more than _MAX_LISTING_BYTES (it is then killed: what it would print is a command's
    choice, through the files a config includes)."""
    try:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
    deadline = time.monotonic() + _GIT_TIMEOUT
    chunks: list[bytes] = []
    size = 0
    with process, selectors.DefaultSelector() as selector:
        assert process.stdout is not None
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            chunk = os.read(process.stdout.fileno(), 64 * 1024) if selector.select(left) else None
            if chunk is None or size + len(chunk) > _MAX_LISTING_BYTES:
                process.kill()
                return None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if process.wait() != 0:
            return None
    return b"".join(chunks)


def _records(listing: str) -> Iterator[tuple[str, str, str]]:
    """(origin, key, value) from `git config --list --show-origin -z`: the origin, then the
    key and value separated by a newline, each record ended by NUL."""
    fields = listing.split("\0")
    for origin, entry in zip(fields[0::2], fields[1::2], strict=False):
        key, _, value = entry.partition("\n")
        yield origin, key, value


@functools.cache
def git_program() -> str | None:
    """The git the user's git most likely is: the first on PATH."""
    return shutil.which("git")


def is_safe(key: str, value: str | None) -> bool:
    """Whether a key (as `git config --list` names it) may stay in a command's config."""
    if not any(fnmatch.fnmatchcase(key, pattern) for pattern in SAFE_KEYS):
        return False
    return not (key.endswith("url") and _TRANSPORT_HELPER in (value or ""))


def parse_config(data: bytes) -> list[tuple[str, str | None]] | None:
    """(key, value) pairs as git reads them, includes not followed, the value None for a
    bare key (`[core] bare` means true); None when git is missing (then no git here would
    run the config either, and it goes whole) or rejects it."""
    git = git_program()
    if git is None:
        return None
    try:
        listed = subprocess.run(
            [git, "config", "--file", "-", "--no-includes", "--list", "-z"],
            input=data,
            capture_output=True,
            timeout=_GIT_TIMEOUT,
            check=False,
            env={"PATH": os.environ.get("PATH", ""), "GIT_CONFIG_NOSYSTEM": "1"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    pairs: list[tuple[str, str | None]] = []
    for record in listed.stdout.decode("utf-8", errors="replace").split("\0"):
        if record:
            key, newline, value = record.partition("\n")
            pairs.append((key, value if newline else None))
    return pairs


def render_config(entries: list[tuple[str, str | None]]) -> str:
    """Config text for `entries` (keys as `git config --list` gives them: section and name
    lower-case, subsection as written), one section header per run of keys."""
    lines: list[str] = []
    header = None
    for key, value in entries:
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        wanted = f'[{section} "{_escape(subsection)}"]' if subsection else f"[{section}]"
        if wanted != header:
            lines.append(wanted)
            header = wanted
        lines.append(f"\t{name}" if value is None else f'\t{name} = "{_escape(value)}"')
    return "".join(f"{line}\n" for line in lines)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
