"""Procedural bugs, the SWE-smith way: small edits to a real module that its own tests should
notice. Each is found on the module's syntax tree and applied to its text (the rest of the
file keeps its formatting, so the oracle's diff is the bug and nothing else).

The kinds are the ones that make real bugs: a flipped comparison, an off-by-one constant,
`and` for `or`, `+` for `-`, `min` for `max`, two arguments swapped, a guard clause removed, a
branch deleted, a condition negated.
"""

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

_COMPARISON_TOKENS: dict[type[ast.cmpop], str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
_FLIPPED = {
    "<": ">=",
    ">=": "<",
    "<=": ">",
    ">": "<=",
    "==": "!=",
    "!=": "==",
    "is": "is not",
    "is not": "is",
    "in": "not in",
    "not in": "in",
}
_ARITHMETIC_TOKENS: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.FloorDiv: "//",
}
_SWAPPED_ARITHMETIC = {"+": "-", "-": "+", "*": "//", "//": "*"}
_SWAPPED_NAMES = {"min": "max", "max": "min", "any": "all", "all": "any"}
_GUARD_ENDS = (ast.Raise, ast.Return, ast.Continue, ast.Break)

KINDS = (
    "flip-comparison",
    "off-by-one",
    "swap-bool-operator",
    "swap-arithmetic",
    "swap-builtin",
    "swap-arguments",
    "remove-guard",
    "delete-branch",
    "negate-condition",
)


@dataclass(frozen=True)
class Mutation:
    """`text[start:end]` of `path` becomes `replacement`."""

    path: str
    kind: str
    line: int
    start: int
    end: int
    replacement: str

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line}:{self.kind}:{self.start}"


def find_mutations(path: str, text: str) -> list[Mutation]:
    """Every mutation of `text` that still compiles, in source order; [] for a file that
    does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    source = _Source(text)
    docstrings = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if node in docstrings:
            continue
        for kind, start, end, alternatives in _candidates(node, source):
            for replacement in alternatives:
                mutated = text[:start] + replacement + text[end:]
                if mutated != text and _compiles(mutated):
                    line = text.count("\n", 0, start) + 1
                    found.append(Mutation(path, kind, line, start, end, replacement))
                    break
    return sorted(found, key=lambda m: (m.start, m.kind))


def apply_mutations(text: str, mutations: list[Mutation]) -> str:
    """`text` with every mutation made (they must not overlap)."""
    for mutation in sorted(mutations, key=lambda m: m.start, reverse=True):
        text = text[: mutation.start] + mutation.replacement + text[mutation.end :]
    return text


Candidate = tuple[str, int, int, tuple[str, ...]]
"""(kind, start, end, replacements to try in order): the first that compiles is kept."""


def _candidates(node: ast.AST, source: "_Source") -> Iterator[Candidate]:
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        token = _COMPARISON_TOKENS[type(node.ops[0])]
        yield from _swap_operator(
            "flip-comparison", node.left, node.comparators[0], token, _FLIPPED[token], source
        )
    elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
        token, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        left, right = node.values
        yield from _swap_operator("swap-bool-operator", left, right, token, other, source)
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC_TOKENS:
        token = _ARITHMETIC_TOKENS[type(node.op)]
        yield from _swap_operator(
            "swap-arithmetic", node.left, node.right, token, _SWAPPED_ARITHMETIC[token], source
        )
    elif isinstance(node, ast.Call):
        yield from _call_mutations(node, source)
    elif isinstance(node, ast.If):
        yield from _if_mutations(node, source)
    if isinstance(node, ast.Subscript | ast.BinOp | ast.Compare | ast.Slice):
        yield from _off_by_one(node, source)


def _call_mutations(node: ast.Call, source: "_Source") -> Iterator[Candidate]:
    if isinstance(node.func, ast.Name) and node.func.id in _SWAPPED_NAMES:
        start, end = source.span(node.func)
        yield "swap-builtin", start, end, (_SWAPPED_NAMES[node.func.id],)
    args = node.args
    if len(args) >= 2 and not any(isinstance(a, ast.Starred) for a in args[:2]):
        (a_start, a_end), (b_start, b_end) = source.span(args[0]), source.span(args[1])
        one, two = source.text[a_start:a_end], source.text[b_start:b_end]
        if one != two and "\n" not in one + two:
            between = source.text[a_end:b_start]
            yield "swap-arguments", a_start, b_end, (two + between + one,)


def _if_mutations(node: ast.If, source: "_Source") -> Iterator[Candidate]:
    if not isinstance(node.test, ast.Compare | ast.BoolOp) and _one_line(node.test):
        test_start, test_end = source.span(node.test)
        test = source.text[test_start:test_end]
        if isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not):
            negated = ast.unparse(node.test.operand)
        else:
            negated = f"not {_parenthesized(node.test, test)}"
        yield "negate-condition", test_start, test_end, (negated,)
    lines = source.whole_lines(node)
    if lines is None:  # an elif, or an if sharing its line with other code
        return
    start, end, indent = lines
    if not node.orelse and isinstance(node.body[-1], _GUARD_ENDS) and len(node.body) <= 3:
        yield "remove-guard", start, end, ("", f"{indent}pass\n")
    if node.orelse:
        body_end = source.starts[node.body[-1].end_lineno or node.lineno]
        yield "delete-branch", body_end, end, ("",)


def _off_by_one(node: ast.AST, source: "_Source") -> Iterator[Candidate]:
    for child in ast.iter_child_nodes(node):
        if (
            isinstance(child, ast.Constant)
            and type(child.value) is int
            and 0 <= child.value <= 64
            and _one_line(child)
        ):
            start, end = source.span(child)
            yield "off-by-one", start, end, (str(child.value + 1),)
            if child.value > 0:
                yield "off-by-one", start, end, (str(child.value - 1),)


def _swap_operator(
    kind: str, left: ast.expr, right: ast.expr, token: str, other: str, source: "_Source"
) -> Iterator[Candidate]:
    """`token` between `left` and `right` becomes `other`, the rest of the text untouched;
    only where nothing but brackets and spaces surround the operator on one line."""
    if left.end_lineno != right.lineno:
        return
    start, end = source.span(left)[1], source.span(right)[0]
    pattern = r"([\s)]*)" + r"\s+".join(map(re.escape, token.split())) + r"([\s(]*)"
    match = re.fullmatch(pattern, source.text[start:end])
    if match is None or (token[0].isalpha() and not (match[1] and match[2])):
        return
    yield kind, start, end, (match[1] + other + match[2],)


def _parenthesized(node: ast.expr, text: str) -> str:
    """`text` safe to put where `node` stood (or to negate): atoms stay bare."""
    if isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant):
        return text
    return f"({text})"


class _Source:
    """The module's text with ast's positions (lines from 1, UTF-8 byte columns) turned
    into character offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, byte_column: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:byte_column].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def whole_lines(self, node: ast.stmt) -> tuple[int, int, str] | None:
        """The lines a statement spans (start offset, end offset past its last newline, its
        indentation), or None when other code (not a comment) shares its first or last line."""
        start, end = self.span(node)
        first = self.starts[node.lineno - 1]
        last_end = self.starts[(node.end_lineno or node.lineno)]
        indent, tail = self.text[first:start], self.text[end:last_end].strip()
        if indent.strip() or (tail and not tail.startswith("#")):
            return None
        return first, last_end, indent


def _one_line(node: ast.AST) -> bool:
    return getattr(node, "lineno", None) == getattr(node, "end_lineno", -1)


def _docstring_nodes(tree: ast.Module) -> set[ast.AST]:
    found: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(body[0].value)
    return found


def _compiles(text: str) -> bool:
    try:
        compile(text, "<mutated>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True
