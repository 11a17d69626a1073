"""How risky a shell command is, judged from its parse tree rather than its text.

The command is parsed with tree-sitter-bash. Every simple command in it (in pipelines, lists,
subshells, functions, `if`/`for`/`while`/`case`, `[[ ]]`, `$(( ))`, here-documents, `$(..)`,
backticks and `<(..)`) is matched against `command_rules.RULES` after unwrapping what runs
another command: `sudo`, `env`, `timeout`, `xargs`, `find -exec`, `python -m`, and `bash -c` /
`eval`, whose text is parsed in turn. Words are read as bash reads them: quotes removed,
escapes resolved, expansions kept as written (so a command name holding `$` is computed when it
runs). The most severe match wins: dangerous > network > writes_workspace > read_only. A
program no rule knows may change files (writes_workspace). Text tree-sitter cannot parse
cleanly is dangerous: what cannot be read cannot be judged.

This is for approval prompts, not a security boundary: the sandbox is.
"""

import fnmatch
import functools
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from tree_sitter import Node, Query, QueryCursor

from opencomposer.agent.protocol.common import ActionClass
from opencomposer.agent.tools.code_index.languages import grammar, parser
from opencomposer.agent.tools.terminal.command_rules import (
    DANGEROUS,
    GLOBAL_VALUE_OPTIONS,
    NETWORK,
    READ,
    REDIRECT_TARGETS,
    RULES,
    RUNNERS,
    SHELLS,
    WRAPPERS,
    WRITES,
    Rule,
    Wrapper,
)

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

    argvs: list[list[str]]
    """The argv of each entry of `commands` (a wrapper's argv includes what it runs)."""


# ---------------------------------------------------------------------------- arguments

_SUBCOMMANDS = frozenset(r.program for r in RULES if r.subcommand)
_PYTHON = re.compile(r"python[\d.]*")
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _is_option(arg: str) -> bool:
    return arg.startswith("-") and arg != "-"


def _has_flag(args: list[str], flags: tuple[str, ...]) -> bool:
    for arg in args:
        if arg == "--":
            return "--" in flags
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
    if rule.unless and _has_flag(args, rule.unless):
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


# Settings that make git run a program; given with -c, what runs is not the command's name.
_GIT_PROGRAM_KEY = re.compile(
    r"(?i)^(alias\.|core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass)=|"
    r"(diff|merge|filter)\.[^=]*\.(command|textconv|driver|clean|smudge|process)=|"
    r"sequence\.editor=|credential\.|gpg\.)"
)


def _inline_git_program(args: list[str]) -> str | None:
    """The first `-c KEY=VALUE` / `--config-env=KEY=ENV` of a git command line (before its
    subcommand) that makes git run a program, e.g. `alias.x=!rm -rf ~`."""
    i = 0
    while i < len(args) and _is_option(args[i]):
        arg, value = args[i], ""
        if arg == "-c" and i + 1 < len(args):
            value, i = args[i + 1], i + 1
        elif arg.startswith("--config-env="):
            value = arg.removeprefix("--config-env=")
        elif arg in GLOBAL_VALUE_OPTIONS["git"]:
            i += 1
        if _GIT_PROGRAM_KEY.match(value):
            return value.split("=", 1)[0]
        i += 1
    return None


def _is_runner(name: str) -> bool:
    return name in RUNNERS or bool(_PYTHON.fullmatch(name))


def _reads_program_from_stdin(argv: list[str]) -> bool:
    if not _is_runner(PurePosixPath(argv[0]).name):
        return False
    args = argv[1:]
    if _has_flag(args, ("-c", "-e")):
        return False
    return _has_flag(args, ("-s",)) or all(a == "-" for a in args if not _is_option(a))


# ---------------------------------------------------------------------------- words

# Outside quotes a backslash makes the next character literal; before a newline it joins lines.
_UNQUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
# Inside double quotes only these characters can be escaped; other backslashes stay.
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\([$`"\\\n])')
_ANSI_C_ESCAPE = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)
_ANSI_C_LETTERS = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
    "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _unescape(pattern: re.Pattern[str], text: str) -> str:
    return pattern.sub(lambda m: "" if m[1] == "\n" else m[1], text)


def _ansi_c_escape(match: re.Match[str]) -> str:
    """One escape of a `$'...'` string, as bash decodes it (unknown ones keep the backslash)."""
    code = match[1]
    letter, rest = code[0], code[1:]
    if letter in "xuU" and rest:
        return chr(min(int(rest, 16), 0x10FFFF))
    if letter in "01234567":
        return chr(int(code, 8))
    if letter == "c" and rest:
        return chr(ord(rest) & 0x1F)
    return _ANSI_C_LETTERS.get(code, "\\" + code)


def _double_quoted(node: Node) -> str:
    """A "..." string: escapes resolved in its literal text, expansions kept as written."""
    raw, base = node.text or b"", node.start_byte
    expansions = [
        (child.start_byte - base, child.end_byte - base)
        for child in node.named_children
        if child.type != "string_content"
    ]
    parts: list[str] = []
    position = 1  # after the opening quote
    for start, end in expansions:
        parts.append(_double_quoted_literal(raw[position:start]))
        parts.append(raw[start:end].decode("utf-8", "replace"))
        position = end
    parts.append(_double_quoted_literal(raw[position:-1]))
    return "".join(parts)


def _double_quoted_literal(raw: bytes) -> str:
    return _unescape(_DOUBLE_QUOTED_ESCAPE, raw.decode("utf-8", "replace"))


def _value(node: Node) -> str:
    """What bash makes of a word before expanding it: quotes removed and escapes resolved.
    Expansions and substitutions (`$X`, `${X}`, `$(cmd)`, backticks) stay as written, so a
    value holding `$` or a backtick is only known when it runs. Brace expansion and globs are
    not performed: `{rm,-rf,/}` stays one word."""
    kind = node.type
    if kind == "word":
        return _unescape(_UNQUOTED_ESCAPE, _text(node))
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "ansi_c_string":
        return _ANSI_C_ESCAPE.sub(_ansi_c_escape, _text(node)[2:-1])
    if kind == "string":
        return _double_quoted(node)
    if kind == "translated_string":  # $"...": a double-quoted string looked up in a catalog
        return "".join(_value(child) for child in node.named_children)
    if kind in ("concatenation", "command_name"):
        return "".join(_value(child) for child in node.children)
    return _text(node)


def _is_computed(word: str) -> bool:
    return "$" in word or "`" in word


# ---------------------------------------------------------------------------- parsing

# tree-sitter-bash has no `time` keyword: it reads `time { rm x; }` as the command `time {`,
# then `rm x;` as its arguments and `}` as a command, so `rm` would go unseen.
_TIME_KEYWORD = Query(grammar("bash"), '((command_name) @name (#eq? @name "time"))')
# Simple commands: tree-sitter gives declarations and `unset` their own node types.
_COMMANDS = frozenset({"command", "declaration_command", "unset_command"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_WRITE_REDIRECTS = {">", ">>", ">|", "&>", "&>>", ">&"}


def _time_keywords(root: Node) -> list[tuple[int, int]]:
    """Byte spans of each `time` keyword, with its `-p`."""
    spans = []
    for name in QueryCursor(_TIME_KEYWORD).captures(root).get("name", []):
        option = name.next_named_sibling
        end = option.end_byte if option is not None and option.text == b"-p" else name.end_byte
        spans.append((name.start_byte, end))
    return spans


def _parse(text: str) -> Node | None:
    """The syntax tree of a script, or None when tree-sitter cannot parse it cleanly (errors
    or missing tokens). The `time` keyword only measures the pipeline after it, so it is
    blanked out and the text parsed again until none is left."""
    source = text.encode("utf-8", "replace")
    while True:
        root = parser("bash").parse(source).root_node
        spans = _time_keywords(root)
        if not spans:
            return None if root.has_error else root
        blanked = bytearray(source)
        for start, end in spans:
            blanked[start:end] = b" " * (end - start)
        source = bytes(blanked)


def _trailing_words(redirect: Node) -> list[Node]:
    """Words tree-sitter-bash reads into a redirection that bash passes to the command:
    `rm >x -rf /` runs `rm -rf /`, yet the grammar makes `-rf` and `/` more destinations of
    `>` (or arguments of a here-document)."""
    if redirect.type == "file_redirect":
        destinations = redirect.children_by_field_name("destination")
        closes = any(child.type in ("<&-", ">&-") for child in redirect.children)
        return destinations if closes else destinations[1:]
    words: list[Node] = []
    for i, child in enumerate(redirect.children):
        field_name = redirect.field_name_for_child(i)
        if field_name == "argument":
            words.append(child)
        elif field_name == "redirect":
            words += _trailing_words(child)
    return words


def _argv_nodes(command: Node) -> list[Node]:
    """The words of a simple command, its name first."""
    if command.type != "command":  # `export`, `declare`, `local`, `unset`...: keyword first
        return [command.children[0], *command.named_children]
    words: list[Node] = []
    for i, child in enumerate(command.children):
        if command.field_name_for_child(i) in ("name", "argument"):
            words.append(child)
        elif child.type in _REDIRECTS:
            words += _trailing_words(child)
    return words


# ---------------------------------------------------------------------------- the walk


@dataclass
class _Finding:
    action_class: ActionClass
    reason: str


@dataclass
class _Classifier:
    findings: list[_Finding] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    argvs: list[list[str]] = field(default_factory=list)
    depth: int = 0

    def add(self, action_class: ActionClass, reason: str) -> None:
        self.findings.append(_Finding(action_class, reason))

    def script(self, text: str) -> None:
        if self.depth >= MAX_DEPTH:
            self.add(DANGEROUS, "scripts nested too deeply to judge")
            return
        root = _parse(text)
        if root is None:
            self.add(DANGEROUS, "could not parse")
            return
        self.depth += 1
        self.node(root)
        self.depth -= 1

    def node(self, node: Node) -> None:
        """Walk any node; constructs without a handler (lists, loops, `if`, `case`, `[[ ]]`,
        `$(( ))`, assignments, substitutions) are judged by the commands inside them."""
        if node.type in _COMMANDS or node.type == "redirected_statement":
            self.statement(node)
        elif node.type == "pipeline":
            self.pipeline(node)
        elif node.type == "function_definition":
            self.function(node)
        elif node.type == "file_redirect":
            self.redirect(node)
        else:
            for child in node.named_children:
                self.node(child)

    def statement(self, node: Node) -> list[str] | None:
        """Walk a statement; returns the argv it finally runs when it is a simple command."""
        if node.type in _COMMANDS:
            return self.command(node)
        if node.type != "redirected_statement":
            self.node(node)
            return None
        body = node.child_by_field_name("body")
        redirects = node.children_by_field_name("redirect")
        argv = None
        if body is not None and body.type in _COMMANDS:
            trailing = [word for redirect in redirects for word in _trailing_words(redirect)]
            argv = self.command(body, trailing)
        elif body is not None:
            self.node(body)
        for redirect in redirects:
            self.node(redirect)
        return argv

    def command(self, node: Node, trailing: list[Node] | None = None) -> list[str]:
        """Classify a simple command, with any words its redirections swallowed; returns the
        argv that finally runs (after unwrapping)."""
        start = len(self.findings)
        for child in node.named_children:
            self.node(child)  # substitutions in its words and assignments; its redirections
        fetched = any(f.action_class == NETWORK for f in self.findings[start:])
        first = len(self.commands)
        argv = self.simple([_value(word) for word in [*_argv_nodes(node), *(trailing or [])]])
        if fetched and any(_is_runner(name) for name in self.commands[first:]):
            self.add(DANGEROUS, "runs code fetched from the network")
        return argv

    def simple(self, argv: list[str]) -> list[str]:
        """Match an argv against the rules, unwrapping wrappers; returns the innermost argv."""
        while argv:
            name = PurePosixPath(argv[0]).name
            args = argv[1:]
            self.commands.append(name)
            self.argvs.append(argv)
            if _is_computed(argv[0]):
                # Unknown (a write), not dangerous: `$EDITOR x`, `$PYTHON -m pytest` and `"$@"`
                # are routine, and warning of them as of `rm -rf /` would teach users to
                # approve dangerous prompts blindly. A write still asks for approval.
                self.add(WRITES, f"the command name {argv[0]} is computed when it runs")
                return argv
            matched = [r for r in RULES if _matches(r, name, args)]
            if name == "git" and (program := _inline_git_program(args)):
                self.add(DANGEROUS, f"git -c {program} defines a command for this run")
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
        for stage in node.named_children:
            start = len(self.findings)
            argv = self.statement(stage)
            if fetched and argv and _reads_program_from_stdin(argv):
                self.add(
                    DANGEROUS,
                    f"piping a download into {PurePosixPath(argv[0]).name} runs it unreviewed",
                )
            fetched |= any(f.action_class == NETWORK for f in self.findings[start:])

    def function(self, node: Node) -> None:
        name_node = node.child_by_field_name("name")
        name = _value(name_node) if name_node is not None else ""
        first = len(self.commands)
        for child in node.named_children:  # the body and the redirections of its definition
            self.node(child)
        if name in self.commands[first:]:
            self.add(DANGEROUS, f"function {name} calls itself (fork bomb pattern)")

    def redirect(self, node: Node) -> None:
        """Judge where a file redirection writes; words it swallowed belong to the command."""
        destinations = node.children_by_field_name("destination")
        for destination in destinations:
            self.node(destination)
        operator = next((child.type for child in node.children if not child.is_named), "")
        if operator not in _WRITE_REDIRECTS or not destinations:
            return  # input, or closing a file descriptor (2>&-)
        target = _value(destinations[0])
        if operator == ">&" and target.isdigit():
            return  # duplicating a file descriptor (2>&1)
        for pattern, action_class, reason in REDIRECT_TARGETS:
            if pattern.search(target):
                if action_class is not None:
                    self.add(action_class, reason.format(target=target))
                return


@functools.lru_cache(maxsize=256)
def classify_command(command: str) -> Classification:
    """The risk class of a shell command line, with reasons and the commands it runs.
    Cached: a call is classified for approval and again for command rules."""
    classifier = _Classifier()
    try:
        classifier.script(command)
    except RecursionError:  # `$($($(...)))` nested hundreds deep
        classifier.add(DANGEROUS, "nested too deeply to judge")
    findings = sorted(classifier.findings, key=lambda f: -SEVERITY[f.action_class])
    reasons = list(dict.fromkeys(f.reason for f in findings))
    action_class = findings[0].action_class if findings else READ
    return Classification(action_class, reasons, classifier.commands, classifier.argvs)
