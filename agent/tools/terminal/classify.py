"""How risky a shell command is, judged from its parse tree rather than its text.

The command is parsed with bashlex. Every simple command in it (in pipelines, lists,
subshells, loops, functions, `$(..)`, backticks and `<(..)`) is matched against `RULES`,
after unwrapping what runs another command: `sudo`, `env`, `timeout`, `xargs`, `find -exec`,
`python -m`, and `bash -c` / `eval`, whose text is parsed in turn. The most severe match wins:
dangerous > network > writes_workspace > read_only. A program no rule knows may change files
(writes_workspace). Text bashlex cannot parse is dangerous: what cannot be read cannot be
judged. (bashlex 0.18 does not parse `[[ ]]`, `$(( ))`, `case` or arrays.)

This is for approval prompts, not a security boundary: the sandbox is.
"""

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import bashlex
from bashlex.ast import node as Node

from opencomposer.agent.protocol.common import ActionClass

READ = ActionClass.read_only
WRITES = ActionClass.writes_workspace
NETWORK = ActionClass.network
DANGEROUS = ActionClass.dangerous
SEVERITY = {READ: 0, WRITES: 1, NETWORK: 2, DANGEROUS: 3}

# Scripts nested deeper than this (`eval "bash -c \"eval ...\""`) are not unwrapped further.
MAX_DEPTH = 8


@dataclass(frozen=True)
class Classification:
    action_class: ActionClass
    reasons: list[str]
    """Why, most severe first: "rm -rf deletes recursively", "curl reaches the network"."""

    commands: list[str]
    """The simple commands found, by name, in order; wrappers (`sudo`, `bash`) come before
    the commands they run."""


@dataclass(frozen=True)
class Rule:
    """Matches a simple command: its name, then optionally leading positional arguments
    (`subcommand`), any of `flags`, a positional argument after the subcommand matching
    `operand`, and at most `max_operands` of those arguments."""

    program: str
    action_class: ActionClass
    reason: str = ""
    subcommand: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    """Options; a one-letter `-x` also matches inside a cluster such as `-rxf`."""

    operand: re.Pattern[str] | None = None
    max_operands: int | None = None


# ---------------------------------------------------------------------------- tables

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
)  # fmt: skip

_SUBCOMMANDS = frozenset(r.program for r in RULES if r.subcommand)

# Where output redirections may point; the first match decides (None: harmless).
REDIRECT_TARGETS: tuple[tuple[re.Pattern[str], ActionClass | None, str], ...] = (
    (re.compile(r"^/dev/(null|zero|stdout|stderr|tty|fd/\d+)$"), None, ""),
    (DISK_DEVICE, DANGEROUS, "writes to the disk device {target}"),
    (_ANY, WRITES, "writes {target}"),
)
_WRITE_REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}

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
_PYTHON = re.compile(r"python[\d.]*")
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# bashlex has no `time` keyword; `\time` (the same command to bash) parses as a word.
_TIME_KEYWORD = re.compile(r"(^|[;&|(!{]\s*|\n\s*)time(?=\s)")


# ---------------------------------------------------------------------------- arguments


def _is_option(arg: str) -> bool:
    return arg.startswith("-") and arg != "-"


def _has_flag(args: list[str], flags: tuple[str, ...]) -> bool:
    for arg in args:
        if arg == "--":
            return False
        if arg in flags or arg.split("=", 1)[0] in flags:
            return True
        if _is_option(arg) and not arg.startswith("--"):
            for letter in arg[1:]:
                if not letter.isalpha():
                    break  # the rest is the option's value (-i.bak, -n5)
                if f"-{letter}" in flags:
                    return True
    return False


def _positionals(program: str, args: list[str]) -> list[str]:
    """Arguments that are not options, skipping the values of the program's global options."""
    value_options = GLOBAL_VALUE_OPTIONS.get(program, frozenset())
    found: list[str] = []
    skip_next = ends = False
    for arg in args:
        if skip_next:
            skip_next = False
        elif ends or not _is_option(arg):
            found.append(arg)
        elif arg == "--":
            ends = True
        elif arg in value_options and not found:
            skip_next = True
    return found


def _matches(rule: Rule, program: str, args: list[str]) -> bool:
    if not fnmatch.fnmatchcase(program, rule.program):
        return False
    positionals = _positionals(program, args)
    if tuple(positionals[: len(rule.subcommand)]) != rule.subcommand:
        return False
    operands = positionals[len(rule.subcommand) :]
    if rule.max_operands is not None and len(operands) > rule.max_operands:
        return False
    if rule.flags and not _has_flag(args, rule.flags):
        return False
    return rule.operand is None or any(rule.operand.search(op) for op in operands)


def _unwrap(wrapper: Wrapper, args: list[str]) -> list[str]:
    """The command a wrapper runs: its arguments after its own options."""
    skip = wrapper.skip
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return args[i + 1 :]
        if _is_option(arg):
            i += 2 if arg in wrapper.value_options else 1
        elif wrapper.assignments and re.match(r"^[A-Za-z_]\w*=", arg):
            i += 1
        elif skip:
            skip -= 1
            i += 1
        else:
            return args[i:]
    return []


def _shell_script(args: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` (also `-lc`, `-ec`...); None without -c."""
    for i, arg in enumerate(args):
        if _is_option(arg) and not arg.startswith("--") and "c" in arg:
            rest = [a for a in args[i + 1 :] if not _is_option(a)]
            return rest[0] if rest else ""
    return None


def _find_exec(args: list[str]) -> list[list[str]]:
    """The commands of `find ... -exec CMD {} ;` (and -execdir, -ok, -okdir)."""
    commands: list[list[str]] = []
    for i, arg in enumerate(args):
        if arg in _FIND_EXEC:
            end = next((j for j in range(i + 1, len(args)) if args[j] in (";", "+")), len(args))
            commands.append(args[i + 1 : end])
    return commands


def _is_runner(name: str) -> bool:
    return name in RUNNERS or bool(_PYTHON.fullmatch(name))


def _reads_program_from_stdin(argv: list[str]) -> bool:
    if not _is_runner(PurePosixPath(argv[0]).name):
        return False
    args = argv[1:]
    if _has_flag(args, ("-c", "-e")):
        return False
    return _has_flag(args, ("-s",)) or all(a == "-" for a in args if not _is_option(a))


# ---------------------------------------------------------------------------- the walk


@dataclass
class _Finding:
    action_class: ActionClass
    reason: str


@dataclass
class _Classifier:
    findings: list[_Finding] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    depth: int = 0

    def add(self, action_class: ActionClass, reason: str) -> None:
        self.findings.append(_Finding(action_class, reason))

    def script(self, text: str) -> None:
        if not text.strip() or all(
            not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()
        ):
            return
        if self.depth >= MAX_DEPTH:
            self.add(DANGEROUS, "scripts nested too deeply to judge")
            return
        try:
            trees = bashlex.parse(text)
        except Exception:  # bashlex raises many types, including NotImplementedError
            try:
                trees = bashlex.parse(_TIME_KEYWORD.sub(r"\1\\time", text))
            except Exception:
                self.add(DANGEROUS, "could not parse")
                return
        self.depth += 1
        for tree in trees:
            self.node(tree)
        self.depth -= 1

    def node(self, node: Node) -> None:
        if node.kind == "command":
            self.command(node)
        elif node.kind == "pipeline":
            self.pipeline(node)
        elif node.kind == "function":
            self.function(node)
        elif node.kind == "redirect":
            self.redirect(node)
        else:
            for child in _children(node):
                self.node(child)

    def command(self, node: Node) -> list[str]:
        """Classify a simple command; returns the argv that finally runs (after unwrapping)."""
        start = len(self.findings)
        words: list[str] = []
        for part in node.parts:
            if part.kind == "word":
                words.append(part.word)
            if part.kind != "redirect":
                for child in _children(part):
                    self.node(child)
            else:
                self.redirect(part)
        fetched = any(f.action_class == NETWORK for f in self.findings[start:])
        first = len(self.commands)
        argv = self.simple(words)
        if fetched and any(_is_runner(name) for name in self.commands[first:]):
            self.add(DANGEROUS, "runs code fetched from the network")
        return argv

    def simple(self, argv: list[str]) -> list[str]:
        """Match an argv against the rules, unwrapping wrappers; returns the innermost argv."""
        while argv:
            name = PurePosixPath(argv[0]).name
            args = argv[1:]
            self.commands.append(name)
            if "$" in argv[0] or "`" in argv[0]:
                self.add(WRITES, f"the command name {argv[0]} is computed when it runs")
                return argv
            matched = [r for r in RULES if _matches(r, name, args)]
            for rule in matched:
                if rule.action_class != READ:
                    self.add(rule.action_class, rule.reason)
            if name in SHELLS and (script := _shell_script(args)) is not None:
                self.script(script)
                return argv
            if name == "eval":
                self.script(" ".join(args))
                return argv
            if name == "find":
                for inner in _find_exec(args):
                    self.simple(inner)
            if _PYTHON.fullmatch(name) and args[:1] == ["-m"] and len(args) > 1:
                argv = args[1:]
            elif name in WRAPPERS:
                argv = _unwrap(WRAPPERS[name], args)
            else:
                if not matched:
                    shown = (
                        [name, *_positionals(name, args)[:1]] if name in _SUBCOMMANDS else [name]
                    )
                    self.add(WRITES, f"{' '.join(shown)} is not known to be read-only")
                return argv
        return argv

    def pipeline(self, node: Node) -> None:
        fetched = False
        for stage in (part for part in node.parts if part.kind != "pipe"):
            start = len(self.findings)
            argv = self.command(stage) if stage.kind == "command" else None
            if argv is None:
                self.node(stage)
            if fetched and argv and _reads_program_from_stdin(argv):
                self.add(
                    DANGEROUS,
                    f"piping a download into {PurePosixPath(argv[0]).name} runs it unreviewed",
                )
            fetched |= any(f.action_class == NETWORK for f in self.findings[start:])

    def function(self, node: Node) -> None:
        name = node.name.word
        first = len(self.commands)
        self.node(node.body)
        if name in self.commands[first:]:
            self.add(DANGEROUS, f"function {name} calls itself (fork bomb pattern)")

    def redirect(self, node: Node) -> None:
        target = node.output
        if node.type not in _WRITE_REDIRECTS or not isinstance(target, Node):
            return  # input, here-documents, or a file descriptor (2>&1)
        for child in _children(target):
            self.node(child)
        for pattern, action_class, reason in REDIRECT_TARGETS:
            if pattern.search(target.word):
                if action_class is not None:
                    self.add(action_class, reason.format(target=target.word))
                return


def _children(node: Node) -> list[Node]:
    children: list[Node] = []
    for attr in ("parts", "list", "redirects"):
        children += getattr(node, attr, None) or []
    for attr in ("command", "output"):
        child = getattr(node, attr, None)
        if isinstance(child, Node):
            children.append(child)
    return children


def classify_command(command: str) -> Classification:
    """The risk class of a shell command line, with reasons and the commands it runs."""
    classifier = _Classifier()
    classifier.script(command)
    findings = sorted(classifier.findings, key=lambda f: -SEVERITY[f.action_class])
    reasons = list(dict.fromkeys(f.reason for f in findings))
    action_class = findings[0].action_class if findings else READ
    return Classification(action_class, reasons, classifier.commands)
