"""Files cut into chunks for semantic search: pieces that each answer one question well.

Code in a supported language is cut along its syntax tree: every top-level definition is a
chunk (with the comments above it), a class bigger than `max_lines` is cut into its
members instead, and the statements between definitions (imports, constants, a main block)
are packed into chunks of up to `max_lines`. Whatever is still too long is cut into balanced
line windows that overlap by a tenth of `max_lines`, so the lines on either side of a cut
are seen together in one window. Other files are prose: blank-line paragraphs packed up to
`max_lines`, a new chunk at every Markdown heading. Line endings are normalised to `\\n`
before anything else, so `Chunk.text` is exactly lines `start_line..end_line` of that text.
"""

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from tree_sitter import Node

from opencomposer.agent.tools.code_index.languages import language_for, parser


@dataclass(frozen=True)
class Chunk:
    path: str
    """Workspace-relative, forward slashes."""

    start_line: int
    """1-based, inclusive."""

    end_line: int
    """1-based, inclusive."""

    text: str
    symbol: str | None
    """Qualified name of the definition (`Config.load`), the Markdown heading, or None."""


def embedding_input(chunk: Chunk) -> str:
    """What the embedder (and the lexical index) sees: the path and symbol first, because a
    query often names them ("the config loader") and the model truncates at 256 tokens, which
    cuts long chunks from the end, never the label."""
    head = f"path: {chunk.path}\n"
    if chunk.symbol:
        head += f"symbol: {chunk.symbol}\n"
    return head + chunk.text


@dataclass(frozen=True)
class _Shape:
    definitions: frozenset[str]
    """Node types that are chunks of their own, at the top level or inside a container."""

    containers: frozenset[str] = frozenset()
    """Definitions cut into their members (the `body` field) when longer than `max_lines`."""


_JS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "method_definition",
        "lexical_declaration",
        "variable_declaration",
    }
)
_TS = _JS | {
    "abstract_class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "internal_module",
    "function_signature",
}
_TS_CONTAINERS = frozenset(
    {"class_declaration", "abstract_class_declaration", "interface_declaration", "internal_module"}
)
_C = frozenset(
    {
        "function_definition",
        "struct_specifier",
        "union_specifier",
        "enum_specifier",
        "type_definition",
    }
)
_SHAPES = {
    "python": _Shape(
        frozenset({"function_definition", "class_definition"}), frozenset({"class_definition"})
    ),
    "javascript": _Shape(_JS, frozenset({"class_declaration"})),
    "typescript": _Shape(_TS, _TS_CONTAINERS),
    "tsx": _Shape(_TS, _TS_CONTAINERS),
    "go": _Shape(frozenset({"function_declaration", "method_declaration", "type_declaration"})),
    "rust": _Shape(
        frozenset(
            {
                "function_item",
                "function_signature_item",
                "impl_item",
                "struct_item",
                "enum_item",
                "union_item",
                "trait_item",
                "mod_item",
                "macro_definition",
            }
        ),
        frozenset({"impl_item", "trait_item", "mod_item"}),
    ),
    "java": _Shape(
        frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
                "method_declaration",
                "constructor_declaration",
            }
        ),
        frozenset({"class_declaration", "interface_declaration", "record_declaration"}),
    ),
    "c": _Shape(_C),
    "cpp": _Shape(
        _C | {"class_specifier", "namespace_definition"},
        frozenset({"class_specifier", "struct_specifier", "namespace_definition"}),
    ),
    "bash": _Shape(frozenset({"function_definition"})),
}
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
# A JS/TS `const f = () => ...` is a definition; `const LIMIT = 3` is module code.
_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function", "class"}
)
_NAMES = frozenset(
    {
        "identifier",
        "field_identifier",
        "type_identifier",
        "qualified_identifier",
        "operator_name",
        "destructor_name",
    }
)
_MARKDOWN = frozenset({".md", ".markdown"})
_HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")


def chunk_file(path: str, text: str, max_lines: int = 60) -> list[Chunk]:
    """Chunks of one file, in file order; `path` is workspace-relative."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    spec = language_for(path)
    if spec is not None and spec.name in _SHAPES:
        tree = parser(spec.name).parse("\n".join(lines).encode("utf-8"))
        cutter = _CodeCutter(_SHAPES[spec.name], max_lines)
        spans = cutter.cut(tree.root_node.named_children, scope=None)
    else:
        markdown = PurePosixPath(path).suffix.lower() in _MARKDOWN
        spans = _prose_spans(lines, max_lines, markdown)
    chunks = [
        Chunk(path, start, end, "\n".join(lines[start - 1 : end]), symbol)
        for start, end, symbol in spans
    ]
    return [chunk for chunk in chunks if chunk.text.strip()]


_Span = tuple[int, int, str | None]
"""1-based inclusive line range and symbol."""


class _CodeCutter:
    def __init__(self, shape: _Shape, max_lines: int) -> None:
        self.shape = shape
        self.max_lines = max_lines

    def cut(self, nodes: list[Node], scope: str | None, header: int | None = None) -> list[_Span]:
        """Spans for sibling nodes. Within a container, `scope` is its name and `header` its
        first line, so its signature lands in the first member's chunk."""
        spans: list[_Span] = []
        # Non-definitions as (start, end, leads): comments and the container's signature lead
        # into the definition after them, which takes them in while it fits in `max_lines`.
        gap: list[tuple[int, int, bool]] = []
        if header is not None and nodes:
            gap.append((header, _first_line(nodes[0]) - 1, True))
        for node in nodes:
            start, end = _first_line(node), _last_line(node)
            inner = _unwrap(node)
            if not self._is_definition(inner):
                gap.append((start, end, node.type in _COMMENTS))
                continue
            while gap and gap[-1][2] and end - gap[-1][0] + 1 <= self.max_lines:
                start = gap.pop()[0]
            spans += self._pack(gap, scope)
            gap = []
            spans += self._definition(inner, start, end, scope)
        return spans + self._pack(gap, scope)

    def _is_definition(self, node: Node) -> bool:
        if node.type not in self.shape.definitions:
            return False
        if node.type in ("lexical_declaration", "variable_declaration"):
            return any(
                _field_type(d, "value") in _FUNCTION_VALUES
                for d in node.named_children
                if d.type == "variable_declarator"
            )
        return True

    def _definition(self, node: Node, start: int, end: int, scope: str | None) -> list[_Span]:
        name = _name(node)
        symbol = f"{scope}.{name}" if scope and name else (name or scope)
        body = node.child_by_field_name("body")
        if end - start + 1 <= self.max_lines:
            return [(start, end, symbol)]
        if node.type in self.shape.containers and body is not None and body.named_children:
            return self.cut(body.named_children, symbol, header=start)
        return [(a, b, symbol) for a, b in _windows(start, end, self.max_lines)]

    def _pack(self, gap: list[tuple[int, int, bool]], symbol: str | None) -> list[_Span]:
        """Consecutive non-definition statements, packed up to `max_lines` per chunk."""
        spans: list[_Span] = []
        run: tuple[int, int] | None = None
        for start, end, _ in gap:
            if end < start:
                continue
            if run is not None and end - run[0] + 1 <= self.max_lines:
                run = (run[0], end)
                continue
            if run is not None:
                spans += [(a, b, symbol) for a, b in _windows(*run, self.max_lines)]
            run = (start, end)
        if run is not None:
            spans += [(a, b, symbol) for a, b in _windows(*run, self.max_lines)]
        return spans


def _first_line(node: Node) -> int:
    return node.start_point.row + 1


def _last_line(node: Node) -> int:
    """A node ending at column 0 (a Rust `///` comment takes its newline) ends a line above."""
    row, column = node.end_point
    return max(node.start_point.row + 1, row if column == 0 else row + 1)


def _unwrap(node: Node) -> Node:
    """The definition inside decorators, `export`, `template <...>` and TypeScript's
    `namespace` statement; the chunk still spans the wrapper."""
    while True:
        if node.type == "decorated_definition":
            inner = node.child_by_field_name("definition")
        elif node.type == "export_statement":
            inner = node.child_by_field_name("declaration")
        elif node.type in ("template_declaration", "expression_statement"):
            inner = node.named_children[-1] if node.named_children else None
        else:
            return node
        if inner is None:
            return node
        node = inner


def _field_type(node: Node, field: str) -> str | None:
    child = node.child_by_field_name(field)
    return child.type if child is not None else None


def _name(node: Node) -> str | None:
    """The definition's own name; a Go method is `Receiver.Method`, a Rust impl its type."""
    if node.type == "method_declaration" and node.child_by_field_name("receiver") is not None:
        receiver = _first_of_type(node.child_by_field_name("receiver"), "type_identifier")
        method = _text(node.child_by_field_name("name"))
        return f"{_text(receiver)}.{method}" if receiver is not None else method
    if node.type == "impl_item":
        kind = node.child_by_field_name("type")
        return _text(_first_of_type(kind, "type_identifier") or kind)
    if node.type in ("lexical_declaration", "variable_declaration", "type_declaration"):
        node = node.named_children[0]
    name = node.child_by_field_name("name")
    if name is not None:
        return _text(name)
    declarator = node.child_by_field_name("declarator")  # C and C++
    while declarator is not None and declarator.type not in _NAMES:
        declarator = declarator.child_by_field_name("declarator")
    return _text(declarator) if declarator is not None else None


def _first_of_type(node: Node | None, kind: str) -> Node | None:
    if node is None or node.type == kind:
        return node
    for child in node.named_children:
        found = _first_of_type(child, kind)
        if found is not None:
            return found
    return None


def _text(node: Node | None) -> str | None:
    return node.text.decode("utf-8", errors="replace") if node is not None and node.text else None


def _windows(start: int, end: int, max_lines: int) -> list[tuple[int, int]]:
    """Balanced windows of at most `max_lines` covering `start..end`, neighbours sharing
    `max_lines // 10` lines (6 of 60): equal sizes, so no window is a sliver."""
    length = end - start + 1
    if length <= max_lines:
        return [(start, end)]
    overlap = max_lines // 10
    count = math.ceil((length - overlap) / (max_lines - overlap))
    size = math.ceil((length + (count - 1) * overlap) / count)
    step = size - overlap
    return [(s, min(end, s + size - 1)) for s in range(start, start + count * step, step)]


def _prose_spans(lines: list[str], max_lines: int, markdown: bool) -> list[_Span]:
    """Paragraphs packed up to `max_lines`; in Markdown every heading starts a chunk, whose
    symbol is that heading."""
    spans: list[_Span] = []
    run: tuple[int, int] | None = None
    symbol: str | None = None
    for start, end, heading in _paragraphs(lines, markdown):
        if run is not None and heading is None and end - run[0] + 1 <= max_lines:
            run = (run[0], end)
            continue
        if run is not None:
            spans += [(a, b, symbol) for a, b in _windows(*run, max_lines)]
        symbol = heading if heading is not None else symbol
        run = (start, end)
    if run is not None:
        spans += [(a, b, symbol) for a, b in _windows(*run, max_lines)]
    return spans


def _paragraphs(lines: list[str], markdown: bool) -> Iterator[tuple[int, int, str | None]]:
    """Runs of non-blank lines (1-based), with the heading text when one opens the run. A
    Markdown heading always opens a run; `#` lines inside fenced code are not headings."""
    start: int | None = None
    heading: str | None = None
    fenced = False
    for number, line in enumerate(lines, 1):
        match = _HEADING.match(line) if markdown and not fenced else None
        if markdown and line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if start is not None and (not line.strip() or match):
            yield start, number - 1, heading
            start = None
        if line.strip() and start is None:
            start, heading = number, (match.group(1) if match else None)
    if start is not None:
        yield start, len(lines), heading
