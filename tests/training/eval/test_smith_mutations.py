"""The procedural bugs: every kind found where it applies, each a small edit that compiles,
the rest of the file byte for byte as it was."""

import ast

import pytest

from opencomposer.training.eval.smith.mutations import KINDS, apply_mutations, find_mutations

MODULE = '''\
"""Module doc: 1 < 2 and 3 > 4."""


def window(items, size):
    """Doc with min(a, b) and x + 1."""
    if not items:
        raise ValueError("no café items")  # non-ASCII text before the code we mutate
    if size > len(items) and size is not None:
        return items[0:size]
    elif size == 1:
        return [items[-1]]
    else:
        last = max(items[1:], key=len)
    return items[size - 1] * 2 + divmod(size, last)[0]
'''


def _edits(kind: str) -> list[tuple[str, str]]:
    return [
        (MODULE[m.start : m.end], m.replacement)
        for m in find_mutations("m.py", MODULE)
        if m.kind == kind
    ]


def test_every_kind_is_found_in_a_module_that_has_each():
    found = {m.kind for m in find_mutations("m.py", MODULE)}
    assert found == set(KINDS)


@pytest.mark.parametrize(
    ("kind", "edit"),
    [
        ("flip-comparison", (" > ", " <= ")),
        ("flip-comparison", (" is not ", " is ")),
        ("flip-comparison", (" == ", " != ")),
        ("swap-bool-operator", (" and ", " or ")),
        ("swap-arithmetic", (" - ", " + ")),
        ("swap-arithmetic", (" * ", " // ")),
        ("swap-builtin", ("max", "min")),
        ("swap-arguments", ("size, last", "last, size")),
        ("negate-condition", ("not items", "items")),
        ("off-by-one", ("0", "1")),
        ("off-by-one", ("1", "0")),
    ],
)
def test_an_edit_touches_the_operator_or_operand_and_nothing_around_it(kind, edit):
    assert edit in _edits(kind)


def test_a_guard_clause_is_removed_whole_and_a_deleted_branch_takes_what_follows():
    (guard,) = _edits("remove-guard")
    assert guard[0].startswith("    if not items:\n") and guard[0].endswith(
        "# non-ASCII text before the code we mutate\n"
    )
    assert guard[1] == ""
    deleted = [before for before, after in _edits("delete-branch")]
    assert any(before.startswith("    elif size == 1:") for before in deleted)
    assert any(before.startswith("    else:\n        last") for before in deleted)


def test_a_lone_guard_becomes_pass_so_the_block_still_compiles():
    text = "def f(x):\n    if x:\n        return 1\n"
    (guard,) = [m for m in find_mutations("f.py", text) if m.kind == "remove-guard"]
    assert apply_mutations(text, [guard]) == "def f(x):\n    pass\n"


def test_every_mutation_compiles_and_changes_only_its_span():
    for mutation in find_mutations("m.py", MODULE):
        mutated = apply_mutations(MODULE, [mutation])
        ast.parse(mutated)
        assert mutated[: mutation.start] == MODULE[: mutation.start]
        tail = len(MODULE) - mutation.end
        assert mutated[len(mutated) - tail :] == MODULE[mutation.end :]


def test_docstrings_are_never_mutated():
    lines = {m.line for m in find_mutations("m.py", MODULE)}
    assert 1 not in lines and 5 not in lines


def test_mutations_in_different_places_apply_together():
    mutations = find_mutations("m.py", MODULE)
    first = next(m for m in mutations if m.kind == "swap-builtin")
    second = next(m for m in mutations if m.kind == "negate-condition")
    both = apply_mutations(MODULE, [first, second])
    assert "min(items[1:]" in both and "if items:" in both


def test_a_file_that_does_not_parse_has_no_mutations():
    assert find_mutations("bad.py", "def f(:\n") == []
    assert find_mutations("py2.py", 'print "hello"\n') == []
