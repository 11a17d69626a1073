"""The tables classify.py judges shell commands by: a rule per program (and subcommand, flag or
operand) giving its risk class, the wrappers that run another command, and where output
redirections may point. Kept apart from the parse-tree walk so the policy reads, and grows, in
one place.
"""

import fnmatch
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from opencomposer.agent.protocol.common import ActionClass

READ = ActionClass.read_only
WRITES = ActionClass.writes_workspace
NETWORK = ActionClass.network
DANGEROUS = ActionClass.dangerous


class OperandTest(Protocol):
    """What `Rule.operand` needs: a compiled regex, or anything else that can `search`."""

    def search(self, operand: str) -> object: ...


@dataclass(frozen=True)
class Rule:
    """Matches a simple command: its name, then optionally leading positional arguments
    (`subcommand`), any of `flags`, none of `unless`, a positional argument after the
    subcommand matching `operand`, and at most `max_operands` of those arguments."""

    program: str
    action_class: ActionClass
    reason: str = ""
    subcommand: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    """Options; a one-letter `-x` also matches inside a cluster such as `-rxf`, and `--`
    matches the end-of-options marker itself."""

    operand: OperandTest | None = None
    max_operands: int | None = None
    unless: tuple[str, ...] = ()
    """Options whose presence means the rule does not apply (`git restore --staged`)."""


class _NamesGitFolder:
    """An operand that is, or may expand to, a `.git` entry: `.git`, `sub/.git/`, `./.git`,
    and globs such as `.g*` or `.[g]it` (bash expands them before the command sees them)."""

    def search(self, operand: str) -> bool:
        parts = PurePosixPath(operand).parts
        if ".git" in parts:
            return True
        return any(
            fnmatch.fnmatchcase(".git", part)
            for part in parts
            if part.startswith(".") and any(c in part for c in "*?[")
        )


READ_ONLY_PROGRAMS = (
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd",
    "pwd", "echo", "printf", "which", "whereis", "type", "file", "stat", "tree", "du", "df",
    "sort", "uniq", "cut", "tr", "diff", "cmp", "comm", "basename", "dirname", "realpath",
    "readlink", "whoami", "id", "uname", "date", "env", "printenv", "true", "false", "test",
    "[", ":", "jq", "nl", "od", "xxd", "hexdump", "md5sum", "sha1sum", "sha256sum", "sha512sum",
    "cksum", "column", "seq", "sleep", "ps", "tac", "rev", "fold", "paste", "join", "strings",
    "less", "more", "man", "yes", "cd", "pushd", "popd", "export", "unset", "set", "wait", "read",
    "sed", "awk", "gawk", "mawk", "tee", "nproc", "free", "uptime", "locale",
)  # fmt: skip
GIT_READ_ONLY = (
    "status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse",
    "describe", "shortlog", "cat-file", "show-ref", "rev-list", "whatchanged",
)  # fmt: skip
NETWORK_PROGRAMS = (
    "curl", "wget", "ssh", "scp", "sftp", "ftp", "telnet", "nc", "ncat", "netcat", "socat",
    "ping", "dig", "nslookup", "http", "https", "aria2c", "gh", "npx", "uvx", "apt", "apt-get",
    "aptitude", "yum", "dnf", "apk", "brew",
)  # fmt: skip
NETWORK_SUBCOMMANDS = {
    "pip*": ("install", "download", "wheel"),
    "uv": ("add", "sync", "lock", "pip install", "tool install", "python install"),
    "poetry": ("install", "add", "update", "lock"),
    "conda": ("install", "create", "update"),
    "mamba": ("install", "create", "update"),
    "npm": ("install", "i", "ci", "add", "update", "publish"),
    "yarn": ("install", "add", "upgrade"),
    "pnpm": ("install", "i", "add", "update"),
    "bun": ("install", "add"),
    "cargo": ("install", "fetch", "update", "publish"),
    "go": ("get", "install", "mod download"),
    "gem": ("install",),
    "docker": ("pull", "push", "login"),
    "podman": ("pull", "push", "login"),
    "git": ("clone", "fetch", "pull", "push", "ls-remote", "submodule update", "remote update"),
}
DANGEROUS_PROGRAMS = {
    "sudo": "sudo runs the command as root",
    "doas": "doas runs the command as root",
    "su": "su runs commands as another user",
    "pkexec": "pkexec runs the command as root",
    "mkfs*": "mkfs formats a disk",
    "mke2fs": "mke2fs formats a disk",
    "mkswap": "mkswap formats a disk",
    "wipefs": "wipefs erases disk signatures",
    "fdisk": "fdisk repartitions a disk",
    "sfdisk": "sfdisk repartitions a disk",
    "parted": "parted repartitions a disk",
    "shred": "shred destroys file contents",
    "shutdown": "shutdown stops the machine",
    "reboot": "reboot restarts the machine",
    "halt": "halt stops the machine",
    "poweroff": "poweroff stops the machine",
}

# rm -r/-f targets that reach past the project: the root or any absolute path, the home
# folder, the parent, everything here (`*`, `.*`, `.`), or a variable (empty makes `$X/` `/`).
_RISKY_TARGET = re.compile(r"^(/.*|~.*|\$.*|\.\.(/.*)?|(\./)?\*|\.\*.*|\./?)$")
_SYSTEM_OR_HOME = re.compile(
    r"^(/\*?|/(bin|boot|dev|etc|home|lib\w*|opt|root|sbin|srv|sys|usr|var)(/.*)?|~/?\*?|\$\{?HOME\}?/?)$"
)
DISK_DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|loop|md|dm-|disk/|mapper/)")
_REMOTE = re.compile(r"^([^/]*:|rsync://)")
_ANY = re.compile(r".")
GIT_FOLDER = _NamesGitFolder()
# An operand of `git checkout` that names files rather than a branch: `.`, a glob, a folder
# (trailing /), a relative or pathspec-magic path, or a name with an extension. A branch
# named `feature/x` is not caught (it could be a folder): approval errs on asking.
_PATHSPEC = re.compile(r"^(\.\.?/?|\.{1,2}/.*|:.*|.*[*?\[].*|.*/|.*\.\w{1,8})$")
# What keeps `find -delete` from deleting everything it walks.
_FIND_NAME_TESTS = (
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
)
_FIND_EXEC = ("-exec", "-execdir", "-ok", "-okdir")
_DELETERS = re.compile(r"^(.*/)?(rm|unlink|shred|rmdir)$")

RULES: tuple[Rule, ...] = (
    *(Rule(p, READ) for p in READ_ONLY_PROGRAMS),
    *(Rule("git", READ, subcommand=(s,)) for s in GIT_READ_ONLY),
    *(Rule("git", READ, subcommand=(s,), max_operands=0) for s in ("branch", "tag", "remote")),
    Rule("git", READ, subcommand=("stash", "list")),
    Rule("git", READ, subcommand=("config",),
         flags=("--get", "--get-all", "--get-regexp", "--list", "-l")),
    # Read-only programs that write with some options.
    Rule("sed", WRITES, "sed -i edits files in place", flags=("-i", "--in-place")),
    Rule("sed", WRITES, "sed w/e commands write files or run commands",
         operand=re.compile(r"\b[wWe]\b")),
    Rule("*awk", WRITES, "awk with system(), > or | writes files or runs commands",
         operand=re.compile(r"system\s*\(|[>|]")),
    Rule("*awk", WRITES, "gawk -i inplace edits files in place", flags=("-i",)),
    Rule("sort", WRITES, "sort -o writes a file", flags=("-o", "--output")),
    Rule("tree", WRITES, "tree -o writes a file", flags=("-o",)),
    Rule("tee", WRITES, "tee writes files", operand=_ANY),
    Rule("find", WRITES, "find -delete deletes files", flags=("-delete",)),
    Rule("find", WRITES, "find -fprint writes files",
         flags=("-fprint", "-fprint0", "-fprintf", "-fls")),
    Rule("rm", WRITES, "rm deletes files"),
    # Network.
    *(Rule(p, NETWORK, f"{p} reaches the network") for p in NETWORK_PROGRAMS),
    *(
        Rule(p, NETWORK, f"{p.rstrip('*')} {s} reaches the network", subcommand=tuple(s.split()))
        for p, subs in NETWORK_SUBCOMMANDS.items()
        for s in subs
    ),
    Rule("yarn", NETWORK, "yarn installs packages from the network", max_operands=0),
    Rule("rsync", NETWORK, "rsync to or from a remote host reaches the network", operand=_REMOTE),
    # Dangerous.
    *(Rule(p, DANGEROUS, reason) for p, reason in DANGEROUS_PROGRAMS.items()),
    Rule("rm", DANGEROUS, "rm -rf deletes recursively outside the project or everything in it",
         flags=("-r", "-R", "-f", "--recursive", "--force"), operand=_RISKY_TARGET),
    Rule("rm", DANGEROUS, "rm --no-preserve-root", flags=("--no-preserve-root",)),
    *(
        Rule(p, DANGEROUS, f"{p} -R on the system or home folder", flags=("-R", "--recursive"),
             operand=_SYSTEM_OR_HOME)
        for p in ("chmod", "chown", "chgrp")
    ),
    Rule("dd", DANGEROUS, "dd writes to a disk device", operand=re.compile(r"^of=/dev/(?!null$)")),
    Rule("tee", DANGEROUS, "tee writes to a disk device", operand=DISK_DEVICE),
    Rule("kill", DANGEROUS, "kill -1 signals every process", flags=("-1",)),
    Rule("date", DANGEROUS, "date -s sets the system clock", flags=("-s", "--set")),
    Rule("git", DANGEROUS, "git push --force rewrites or deletes remote history",
         subcommand=("push",), flags=("-f", "--force", "--force-with-lease",
                                      "--force-if-includes", "--mirror", "-d", "--delete",
                                      "--prune")),
    Rule("git", DANGEROUS, "git push +ref/:ref rewrites or deletes remote branches",
         subcommand=("push",), operand=re.compile(r"^[+:]")),
    Rule("git", DANGEROUS, "git reset --hard discards uncommitted changes", subcommand=("reset",),
         flags=("--hard",)),
    Rule("git", DANGEROUS, "git clean -f deletes untracked files", subcommand=("clean",),
         flags=("-f", "--force")),
    # Destroying history or uncommitted work: what the user could not get back.
    Rule("rm", DANGEROUS, "rm deletes the repository's history (.git)", operand=GIT_FOLDER),
    Rule("mv", DANGEROUS, "mv moves or replaces the repository's history (.git)",
         operand=GIT_FOLDER),
    Rule("find", DANGEROUS, "find -delete with no name or path test deletes all it walks",
         flags=("-delete",), unless=_FIND_NAME_TESTS),
    Rule("find", DANGEROUS, "find -exec rm with no name or path test deletes all it walks",
         flags=_FIND_EXEC, operand=_DELETERS, unless=_FIND_NAME_TESTS),
    Rule("git", DANGEROUS, "git reset --merge discards uncommitted changes",
         subcommand=("reset",), flags=("--merge",)),
    Rule("git", DANGEROUS, "git checkout of files discards their uncommitted changes",
         subcommand=("checkout",), flags=("--", "-f", "--force", "-p", "--patch", "--ours",
                                          "--theirs")),
    Rule("git", DANGEROUS, "git checkout of files discards their uncommitted changes",
         subcommand=("checkout",), operand=_PATHSPEC, unless=("-b", "-B", "--orphan")),
    Rule("git", DANGEROUS, "git checkout -B resets a branch", subcommand=("checkout",),
         flags=("-B",)),
    Rule("git", DANGEROUS, "git restore discards uncommitted changes", subcommand=("restore",),
         unless=("--staged", "-S")),
    Rule("git", DANGEROUS, "git restore --worktree discards uncommitted changes",
         subcommand=("restore",), flags=("--worktree", "-W")),
    Rule("git", DANGEROUS, "git switch --discard-changes/-C discards changes or resets a branch",
         subcommand=("switch",), flags=("-f", "--force", "--discard-changes", "-C",
                                        "--force-create")),
    *(Rule("git", DANGEROUS, f"git stash {s} deletes stashed changes", subcommand=("stash", s))
      for s in ("drop", "clear")),
    Rule("git", DANGEROUS, "git branch -D/-f/-M deletes or overwrites a branch",
         subcommand=("branch",), flags=("-D", "-f", "--force", "-M", "-C")),
    Rule("git", DANGEROUS, "git tag -d deletes a tag", subcommand=("tag",),
         flags=("-d", "--delete")),
    Rule("git", DANGEROUS, "git rm -f discards uncommitted changes", subcommand=("rm",),
         flags=("-f", "--force")),
    Rule("git", DANGEROUS, "git worktree remove --force discards a worktree's changes",
         subcommand=("worktree", "remove"), flags=("-f", "--force")),
    Rule("git", DANGEROUS, "git update-ref -d deletes a ref", subcommand=("update-ref",),
         flags=("-d",)),
    *(Rule("git", DANGEROUS, f"git {s} {v} can drop unreachable history",
           subcommand=(s, v)) for s, v in (("reflog", "expire"), ("reflog", "delete"))),
    Rule("git", DANGEROUS, "git gc --prune drops unreachable history", subcommand=("gc",),
         flags=("--prune",)),
    *(Rule("git", DANGEROUS, f"git {s} rewrites or drops history", subcommand=(s,))
      for s in ("prune", "filter-branch", "filter-repo", "replace")),
    Rule("git", DANGEROUS, "git submodule deinit -f discards a submodule's changes",
         subcommand=("submodule", "deinit"), flags=("-f", "--force")),
)  # fmt: skip

# Where output redirections may point; the first match decides (None: harmless).
REDIRECT_TARGETS: tuple[tuple[re.Pattern[str], ActionClass | None, str], ...] = (
    (re.compile(r"^/dev/(null|zero|stdout|stderr|tty|fd/\d+)$"), None, ""),
    (DISK_DEVICE, DANGEROUS, "writes to the disk device {target}"),
    (_ANY, WRITES, "writes {target}"),
)

# Options taking a value before a program's subcommand (`git -C dir push`).
GLOBAL_VALUE_OPTIONS = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"}),
    "docker": frozenset({"-H", "--host", "-c", "--context", "--config", "-l", "--log-level"}),
}


@dataclass(frozen=True)
class Wrapper:
    """A program that runs the command in its arguments."""

    value_options: frozenset[str] = frozenset()
    """Its options that take a value (`sudo -u bob`)."""

    skip: int = 0
    """Positional arguments before the command (timeout's duration)."""

    assignments: bool = False
    """Leading NAME=value arguments are not the command (env)."""


WRAPPERS = {
    "sudo": Wrapper(frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T",
                               "--user", "--group"})),
    "doas": Wrapper(frozenset({"-u", "-C"})),
    "env": Wrapper(frozenset({"-u", "-C", "--unset", "--chdir"}), assignments=True),
    "timeout": Wrapper(frozenset({"-s", "-k", "--signal", "--kill-after"}), skip=1),
    "nohup": Wrapper(),
    "nice": Wrapper(frozenset({"-n", "--adjustment"})),
    "time": Wrapper(frozenset({"-f", "-o", "--format", "--output"})),
    "xargs": Wrapper(frozenset({"-I", "-n", "-P", "-d", "-E", "-L", "-s", "-a", "--max-args",
                                "--max-procs", "--delimiter", "--arg-file"})),
    "stdbuf": Wrapper(frozenset({"-i", "-o", "-e"})),
    "ionice": Wrapper(frozenset({"-c", "-n"})),
    "exec": Wrapper(frozenset({"-a"})),
    "command": Wrapper(),
    "builtin": Wrapper(),
}  # fmt: skip
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
# Programs that run code given to them; fed from the network, they run it unreviewed.
RUNNERS = SHELLS | {"python", "python3", "perl", "ruby", "node", "php", "eval", "source", "."}
