import ast
from pathlib import Path

import pytest

PACKAGE = Path("/app/textkit")


def names_in(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.FunctionDef):
            yield node.name
        elif isinstance(node, ast.alias):
            yield node.name.split(".")[-1]


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_old_name_gone(path):
    assert "normalise_ws" not in set(names_in(path))


def test_new_name():
    import textkit
    from textkit.util import collapse_whitespace

    assert textkit.collapse_whitespace is collapse_whitespace
    assert collapse_whitespace("  a \t b\n\nc ") == "a b c"
    assert not hasattr(textkit.util, "normalise_ws")


def test_behaviour_kept():
    from textkit.compare import diff_words, same_text
    from textkit.counts import word_count
    from textkit.lines import clean_lines
    from textkit.slugs import slugify
    from textkit.titles import title_case
    from textkit.wrap import wrap

    assert title_case("  hello   world ") == "Hello World"
    assert slugify(" Hello,   World! ") == "hello-world"
    assert word_count(" one  two\tthree ") == 3 and word_count("   ") == 0
    assert wrap("a  b   c", 3) == ["a b", "c"]
    assert same_text("A  b", "a b") and diff_words("a b", "b  c") == {"a", "c"}
    assert clean_lines(" x  y \n\n  \n z ") == ["x y", "z"]
