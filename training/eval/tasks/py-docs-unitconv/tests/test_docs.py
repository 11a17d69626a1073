import ast
import doctest
import importlib
import re
from pathlib import Path

import pytest

APP = Path("/app/unitconv")
ORIGINAL = Path(__file__).parent / "original"
MODULES = sorted(p.name for p in ORIGINAL.glob("*.py"))


def strip_docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def public_items(tree):
    """(qualified name, node, parameter names, owning class node or None) of each public
    function, class and method; a class's parameters are its constructor's (a dataclass's fields)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            yield node.name, node, params(node), None
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            is_dataclass = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
            if init is not None:
                names = params(init)
            elif is_dataclass:
                names = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            else:
                names = []
            yield node.name, node, names, None
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    yield f"{node.name}.{item.name}", item, params(item), node


def params(fn):
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return [n for n in names if n not in ("self", "cls")]


def parsed(name):
    return ast.parse((APP / name).read_text())


ITEMS = [
    (module, qualname, names)
    for module in MODULES
    for qualname, _, names, _ in public_items(ast.parse((ORIGINAL / module).read_text()))
]


@pytest.mark.parametrize("module", MODULES)
def test_code_is_unchanged(module):
    assert (APP / module).is_file(), f"unitconv/{module} is gone"
    assert strip_docstrings(parsed(module)) == strip_docstrings(ast.parse((ORIGINAL / module).read_text())), (
        f"unitconv/{module}: more than docstrings changed"
    )


@pytest.mark.parametrize(("module", "qualname", "names"), ITEMS, ids=[f"{m}:{q}" for m, q, _ in ITEMS])
def test_documented(module, qualname, names):
    items = {q: (node, owner) for q, node, _, owner in public_items(parsed(module))}
    assert qualname in items, f"{qualname} is missing from unitconv/{module}"
    node, _ = items[qualname]
    doc = ast.get_docstring(node) or ""
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        text = doc + "\n" + ((ast.get_docstring(init) or "") if init else "")
    else:
        text = doc
    assert doc.strip(), f"{qualname} has no docstring"
    missing = [n for n in names if not re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text)]
    assert not missing, f"{qualname}'s docstring does not mention {missing}"
    prose = text
    for n in names:
        prose = re.sub(rf"(?<![\w]){re.escape(n)}(?![\w])", " ", prose)
    assert len(re.findall(r"[A-Za-z]{2,}", prose)) >= 3, f"{qualname}'s docstring says too little"


@pytest.mark.parametrize(("module", "function"), [("unitconv.convert", "convert"), ("unitconv.parse", "parse_quantity")])
def test_has_passing_examples(module, function):
    mod = importlib.import_module(module)
    tests = [t for t in doctest.DocTestFinder().find(mod) if t.name == f"{module}.{function}"]
    examples = [e for t in tests for e in t.examples]
    assert examples, f"{function} has no doctest examples"
    assert any(f"{function}(" in e.source for e in examples), f"{function}'s examples never call it"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0


@pytest.mark.parametrize("module", [m.removesuffix(".py") for m in MODULES])
def test_every_example_in_the_package_passes(module):
    mod = importlib.import_module(f"unitconv.{module}" if module != "__init__" else "unitconv")
    failures, _ = doctest.testmod(mod, optionflags=doctest.ELLIPSIS, verbose=False)
    assert failures == 0


def test_behaviour():
    from unitconv import Quantity, convert, convert_many, format_quantity, humanize, parse_quantity

    assert convert(1, "mi", "km") == pytest.approx(1.609344)
    assert convert(100, "C", "F") == pytest.approx(212)
    assert convert_many([1, 2], "km", "m", ndigits=0) == [1000, 2000]
    assert parse_quantity(" 1,200.5 miles ") == Quantity(1200.5, "mi")
    assert humanize(Quantity(5400, "s")) == "1.5 h"
    assert format_quantity(Quantity(1234.5, "m"), unit="km") == "1.23 km"
