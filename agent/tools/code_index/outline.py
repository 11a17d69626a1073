"""File outlines: the definitions in one source file, found by tree-sitter queries.

The patterns are data, one `queries/<language>.scm` per grammar. A pattern captures the whole
definition as `@definition.<kind>` and its name as `@name`; `@parent` names an owner that does
not enclose the definition (a Go method's receiver type), and `@scope` marks a container that is
not listed itself but is the parent of what it holds (a Rust impl block). The rules applied to
the matches are the same for every language:

- one symbol per name: when several patterns match it, the widest span wins (so a decorated
  definition starts at its first decorator), then the earlier pattern;
- the parent is the innermost enclosing definition unless a pattern captured one;
- a function whose parent is a type (or a qualified name's scope) is a method;
- a C++ qualified name `ns::A<T>::f` is the name `f` with parent `A`.

Syntax errors leave whatever definitions tree-sitter recovered; bytes that are not UTF-8 are
decoded with replacement characters, so no input makes `outline` raise.
"""

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import NamedTuple

from tree_sitter import Node, Query, QueryCursor

from opencomposer.agent.tools.code_index.languages import grammar, parser

KINDS = (
    "function",
    "method",
    "class",
    "interface",
    "struct",
    "enum",
    "trait",
    "type",
    "module",
    "constant",
)
"""Every `Symbol.kind`. Records and annotation types (Java) are classes and interfaces, unions
are structs, namespaces and TypeScript modules are modules, type aliases and typedefs are
types. Constants are explicit (Go/Rust `const`, Rust `static`, Java `static final`, C `#define
NAME value`) or conventional (top-level UPPER_CASE names in Python, JavaScript, TypeScript)."""

MAX_SIGNATURE = 160
"""Characters of the signature line kept."""

LONG_LINE_LEAD = 40
"""On a line longer than MAX_SIGNATURE before the name (minified code), the signature starts this
many bytes before the name instead of at the line start."""

# A function inside one of these is a method; "scope" is the kind of @scope captures.
_TYPE_KINDS = frozenset({"class", "interface", "struct", "enum", "trait", "scope"})
# These never enclose other symbols: `typedef struct s {...} s_t;` is not the struct's parent.
_LEAF_KINDS = frozenset({"type", "constant"})
# TSX's grammar extends TypeScript's, so the TypeScript patterns cover it.
_QUERY_FILE = {"tsx": "typescript"}


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    kind: str
    """One of KINDS."""

    path: str
    """Workspace-relative, forward slashes."""

    line: int
    """1-based first line of the definition (Python decorators and Java annotations included)."""

    end_line: int
    """1-based last line of the definition."""

    parent: str | None
    """The enclosing or owning symbol's name (a method's class, a Rust impl's type); None at
    top level."""

    signature: str
    """The line holding the name, stripped, at most MAX_SIGNATURE characters."""


class _Match(NamedTuple):  # a tuple: tens of thousands are made per build
    start: int
    end: int
    pattern: int
    kind: str
    name: str
    name_offset: int
    start_line: int
    end_line: int
    owner: str | None
    """The parent captured by the pattern or taken from a qualified name."""


@cache
def _query(language: str) -> Query:
    name = _QUERY_FILE.get(language, language)
    text = resources.files(__package__).joinpath("queries", f"{name}.scm").read_text("utf-8")
    return Query(grammar(language), text)


def outline(path: str, source: bytes, language: str) -> list[Symbol]:
    """The definitions in `source` (a file of `language`, shown as `path`), in source order,
    nested ones included with their parent."""
    tree = parser(language).parse(source)
    matches = _matches(QueryCursor(_query(language)).matches(tree.root_node))
    return _symbols(path, source, sorted(matches, key=lambda m: (m.start, -m.end, m.name_offset)))


def _matches(raw: list[tuple[int, dict[str, list[Node]]]]) -> list[_Match]:
    """One match per name node, the widest (then earliest) pattern winning."""
    best: dict[int, _Match] = {}
    for pattern, captures in raw:
        name_node = captures["name"][0]
        kind, node = next(
            (key.removeprefix("definition."), nodes[0])
            for key, nodes in captures.items()
            if key not in ("name", "parent")
        )
        name_node, scope = _split_qualified(name_node)
        owner = captures["parent"][0] if "parent" in captures else scope
        if name_node.start_byte == name_node.end_byte:  # a MISSING node from error recovery
            continue
        match = _Match(
            start=node.start_byte,
            end=node.end_byte,
            pattern=pattern,
            kind=kind,
            name=_text(name_node),
            name_offset=name_node.start_byte,
            start_line=node.start_point.row + 1,
            end_line=_last_line(node),
            owner=_text(owner) if owner is not None else None,
        )
        kept = best.get(match.name_offset)
        if kept is None or (match.start, -match.end, pattern) < (
            kept.start,
            -kept.end,
            kept.pattern,
        ):
            best[match.name_offset] = match
    return list(best.values())


def _symbols(path: str, source: bytes, matches: list[_Match]) -> list[Symbol]:
    """Symbols from matches sorted outermost-first, with parents from a stack of open
    containers."""
    symbols: list[Symbol] = []
    open_: list[_Match] = []
    for match in matches:
        while open_ and open_[-1].end < match.end:
            open_.pop()
        # Two names declared together (`const a = ..., b = ...`) share a span: siblings.
        container = next(
            (c for c in reversed(open_) if (c.start, c.end) != (match.start, match.end)), None
        )
        if match.kind not in _LEAF_KINDS:
            open_.append(match)
        if match.kind == "scope":
            continue
        kind, parent = match.kind, match.owner
        if parent is None and container is not None:
            parent = container.name
        if kind == "function" and (
            match.owner is not None or (container is not None and container.kind in _TYPE_KINDS)
        ):
            kind = "method"
        symbols.append(
            Symbol(
                name=match.name,
                kind=kind,
                path=path,
                line=match.start_line,
                end_line=match.end_line,
                parent=parent,
                signature=_signature(source, match.name_offset),
            )
        )
    return symbols


def _split_qualified(name: Node) -> tuple[Node, Node | None]:
    """C++ `ns::A<T>::f` -> (`f`, `A`); any other name -> (name, None)."""
    scope = None
    while name.type == "qualified_identifier":
        outer, inner = name.child_by_field_name("scope"), name.child_by_field_name("name")
        if inner is None:
            break
        if outer is not None:
            scope = outer.child_by_field_name("name") if outer.type == "template_type" else outer
        name = inner
    return name, scope


def _last_line(node: Node) -> int:
    """1-based; a node ending just after a newline (a C `#define`) ends on the line before."""
    row, column = node.end_point
    return row if column == 0 and row > node.start_point.row else row + 1


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _signature(source: bytes, offset: int) -> str:
    """The stripped line holding `offset`, looking no further than a few hundred bytes either
    way so minified files with thousands of definitions on one line stay linear."""
    lo = max(0, offset - MAX_SIGNATURE)
    newline = source.rfind(b"\n", lo, offset)
    start = newline + 1 if newline >= 0 or lo == 0 else offset - LONG_LINE_LEAD
    limit = min(len(source), start + 4 * MAX_SIGNATURE)  # up to 4 UTF-8 bytes a character
    end = source.find(b"\n", offset, limit)
    line = source[start : end if end >= 0 else limit]
    return line.decode("utf-8", "replace").strip()[:MAX_SIGNATURE]
