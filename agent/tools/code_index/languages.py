"""The languages the code tools understand, and their tree-sitter grammars.

Grammars come from the per-language `tree-sitter-<lang>` wheels (compiled, bundled, no
download at run time). They are loaded on first use and shared, because a Language object is
immutable and a Parser is cheap to make.
"""

import importlib
from dataclasses import dataclass
from functools import cache
from pathlib import PurePath

from tree_sitter import Language, Parser


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    module: str
    """The grammar wheel's module."""

    entry: str = "language"
    """The module function returning the grammar (TypeScript ships two)."""

    extensions: tuple[str, ...] = ()


LANGUAGES: tuple[LanguageSpec, ...] = (
    LanguageSpec("python", "tree_sitter_python", extensions=(".py", ".pyi")),
    LanguageSpec(
        "javascript", "tree_sitter_javascript", extensions=(".js", ".mjs", ".cjs", ".jsx")
    ),
    LanguageSpec(
        "typescript",
        "tree_sitter_typescript",
        "language_typescript",
        extensions=(".ts", ".mts", ".cts"),
    ),
    LanguageSpec("tsx", "tree_sitter_typescript", "language_tsx", extensions=(".tsx",)),
    LanguageSpec("go", "tree_sitter_go", extensions=(".go",)),
    LanguageSpec("rust", "tree_sitter_rust", extensions=(".rs",)),
    LanguageSpec("java", "tree_sitter_java", extensions=(".java",)),
    LanguageSpec("c", "tree_sitter_c", extensions=(".c", ".h")),
    LanguageSpec(
        "cpp",
        "tree_sitter_cpp",
        extensions=(".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++"),
    ),
    LanguageSpec("bash", "tree_sitter_bash", extensions=(".sh", ".bash")),
)
BY_NAME = {spec.name: spec for spec in LANGUAGES}
BY_EXTENSION = {ext: spec for spec in LANGUAGES for ext in spec.extensions}


def language_for(path: str | PurePath) -> LanguageSpec | None:
    """The language of a file by its extension, or None when unsupported."""
    return BY_EXTENSION.get(PurePath(path).suffix.lower())


@cache
def grammar(name: str) -> Language:
    spec = BY_NAME[name]
    return Language(getattr(importlib.import_module(spec.module), spec.entry)())


def parser(name: str) -> Parser:
    return Parser(grammar(name))
