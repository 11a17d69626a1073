"""Differential tests against codex-apply-patch, the reference implementation of the
`*** Begin Patch` format: on patches it accepts, our files must come out the same.

Intentional differences, each pinned by a test below:
- Ambiguous context (no @@ anchor, several matches): Codex silently takes the first; we refuse,
  because a wrong guess is a silent misapply.
- Fuzzy matching: Codex falls back to trimming both ends of lines and to folding typographic
  punctuation into ASCII; we stop at ignoring trailing whitespace (with a note) and otherwise
  explain the mismatch, so what gets replaced is exactly what the model saw.
- A context line matched ignoring trailing whitespace keeps the file's text; Codex writes the
  patch's version, which changes a line the patch calls unchanged.
- Final newline: Codex always writes one; we keep the file's state (the Codex format has no
  way to ask for a change).
- Line endings: Codex adds "\n" lines to CRLF files, leaving them mixed; we use the file's
  dominant ending.
- Adding an existing file, moving onto one, or two sections for one path: Codex overwrites or
  applies in sequence; we refuse, since the model's picture of the files is wrong.
- A hunk of only added lines under an @@ anchor: Codex appends it at the end of the file; we
  insert it right after the anchor, where the model put it.
- Nested `@@` anchors (which Codex's own instructions show), unified `@@ -l,s +l,s @@` headers,
  a move without hunks, and a ```-fenced patch: Codex rejects them; we accept them.
- An update that changes nothing: Codex reports success; we refuse (agents loop on a silent
  no-op).
- A blank last line: Codex drops it from any updated file whose new text ends with one (its
  final-newline step takes the blank line for the terminator), and appends added-only hunks
  before it rather than at the end; we keep it and append after it.
- An added-only hunk without an anchor goes to the end of the file in both, but when more hunks
  follow it, Codex applies them with stale line indexes (misplacing lines, or panicking); we
  place every hunk against the original lines.
"""

import difflib

import codex_apply_patch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opencomposer.agent.tools.editing.patch_format import PatchError
from opencomposer.agent.tools.editing.patch_parse import parse_patch
from opencomposer.agent.tools.editing.patch_plan import plan_patch

SOURCE = (
    "class A:\n    def f(self):\n        return 1\n\nclass B:\n    def f(self):\n        return 1\n"
)


def ours(patch: str, files: dict[str, str]) -> dict[str, str]:
    changes, _ = plan_patch(parse_patch(patch), files.get)
    result = dict(files)
    for change in changes:
        if change.kind in ("delete", "move"):
            del result[change.path]
        if change.kind != "delete":
            result[change.move_to or change.path] = change.new_text
    return result


def theirs(patch: str, files: dict[str, str]) -> dict[str, str]:
    return dict(codex_apply_patch.apply_patch_in_memory(patch, files).files)


def accepted_by_codex(patch: str, files: dict[str, str]) -> dict[str, str] | None:
    """Codex's result, or None when it rejects the patch (RuntimeError) or panics on it (pyo3's
    PanicException, which derives from BaseException only)."""
    try:
        return theirs(patch, files)
    except RuntimeError:
        return None
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        return None


def codex(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"])


SAME = {
    "add": (codex("*** Add File: docs/a.md", "+# Title", "+", "+Body ✓"), {}),
    "add empty": (codex("*** Add File: empty.txt"), {}),
    "delete": (codex("*** Delete File: a.py"), {"a.py": SOURCE}),
    "update": (
        codex(
            "*** Update File: a.py",
            "@@ class A:",
            "     def f(self):",
            "-        return 1",
            "+        return 2",
        ),
        {"a.py": SOURCE},
    ),
    "first hunk without @@": (
        codex(
            "*** Update File: a.py",
            " class A:",
            "     def f(self):",
            "-        return 1",
            "+        x = 1",
            "+        return x",
        ),
        {"a.py": SOURCE},
    ),
    "anchor without indentation": (
        codex("*** Update File: a.py", "@@ def g(self):", "-        return 1", "+        return 2"),
        {"a.py": SOURCE.replace("B:\n    def f", "B:\n    def g")},
    ),
    "several hunks": (
        codex(
            "*** Update File: a.py",
            "@@",
            " class A:",
            "-    def f(self):",
            "+    def g(self):",
            "@@ class B:",
            "-    def f(self):",
            "+    def h(self):",
        ),
        {"a.py": SOURCE},
    ),
    "move and change": (
        codex(
            "*** Update File: a.py",
            "*** Move to: pkg/b.py",
            "@@ class B:",
            "-        return 1",
            "+        return 3",
        ),
        {"a.py": SOURCE},
    ),
    "end of file": (
        codex(
            "*** Update File: a.py",
            "@@",
            "-        return 1",
            "+        return 4",
            "*** End of File",
        ),
        {"a.py": SOURCE},
    ),
    "blank line between hunks": (
        codex(
            "*** Update File: a.py",
            "@@",
            "-class A:",
            "+class A0:",
            "",
            "@@",
            "-class B:",
            "+class B0:",
        ),
        {"a.py": SOURCE},
    ),
    "append without context": (
        codex("*** Update File: a.py", "+", "+class C:", "+    pass"),
        {"a.py": SOURCE},
    ),
    "into an empty file": (codex("*** Update File: a.py", "+x"), {"a.py": ""}),
    "delete everything": (codex("*** Update File: a.py", "-a", "-b"), {"a.py": "a\nb\n"}),
    "whitespace around markers": (
        "  *** Begin Patch\n *** Update File: a.py \n@@\n-a\n+b\n*** End Patch  \n",
        {"a.py": "a\n"},
    ),
    "many files": (
        codex(
            "*** Add File: n.txt",
            "+new",
            "*** Update File: a.py",
            "@@",
            "-a",
            "+A",
            "*** Delete File: old.txt",
            "*** Update File: c.py",
            "*** Move to: d.py",
            "@@",
            " keep",
            "-drop",
        ),
        {"a.py": "a\n", "old.txt": "x\n", "c.py": "keep\ndrop\n"},
    ),
    "unicode": (codex("*** Update File: u.txt", " 🐍 𝄞", "-é", "+e\u0301"), {"u.txt": "🐍 𝄞\né\n"}),
}


@pytest.mark.parametrize("case", SAME)
def test_same_result_as_codex(case: str) -> None:
    patch, files = SAME[case]
    assert ours(patch, files) == theirs(patch, files)


# ---------------------------------------------------------------------- intended differences


def test_ambiguous_context_is_refused_not_guessed() -> None:
    patch = codex(
        "*** Update File: a.py", "     def f(self):", "-        return 1", "+        return 2"
    )
    assert theirs(patch, {"a.py": SOURCE})["a.py"] == SOURCE.replace("return 1", "return 2", 1)
    with pytest.raises(PatchError, match="match in 2 places"):
        ours(patch, {"a.py": SOURCE})


@pytest.mark.parametrize(
    "file",
    [
        "  x = 'a'\n",  # leading whitespace differs
        "x = \u2018a\u2019\n",  # typographic quotes
    ],
)
def test_no_fuzzy_matching_beyond_trailing_whitespace(file: str) -> None:
    patch = codex("*** Update File: a.py", "-x = 'a'", "+x = 'b'")
    assert theirs(patch, {"a.py": file})["a.py"] == "x = 'b'\n"
    with pytest.raises(PatchError, match="its lines were not found"):
        ours(patch, {"a.py": file})


def test_loosely_matched_context_keeps_the_files_text() -> None:
    patch = codex("*** Update File: a.py", " a", "-b", "+c")
    files = {"a.py": "a  \nb\n"}
    assert theirs(patch, files)["a.py"] == "a\nc\n"
    assert ours(patch, files)["a.py"] == "a  \nc\n"


def test_missing_final_newline_is_kept() -> None:
    patch = codex("*** Update File: a.py", "-b", "+c")
    assert theirs(patch, {"a.py": "a\nb"})["a.py"] == "a\nc\n"
    assert ours(patch, {"a.py": "a\nb"})["a.py"] == "a\nc"


def test_crlf_file_stays_crlf() -> None:
    patch = codex("*** Update File: a.py", " a", "-b", "+c")
    assert theirs(patch, {"a.py": "a\r\nb\r\nd\r\n"})["a.py"] == "a\nc\nd\r\n"
    assert ours(patch, {"a.py": "a\r\nb\r\nd\r\n"})["a.py"] == "a\r\nc\r\nd\r\n"


@pytest.mark.parametrize(
    ("patch", "files"),
    [
        (codex("*** Add File: a.py", "+x"), {"a.py": "old\n"}),
        (
            codex("*** Update File: a.py", "*** Move to: b.py", "-a", "+x"),
            {"a.py": "a\n", "b.py": ""},
        ),
        (
            codex("*** Update File: a.py", "-a", "+x", "*** Update File: a.py", "-b", "+y"),
            {"a.py": "a\nb\n"},
        ),
    ],
)
def test_conflicting_operations_are_refused(patch: str, files: dict[str, str]) -> None:
    theirs(patch, files)
    with pytest.raises(PatchError):
        ours(patch, files)


def test_added_lines_under_an_anchor_go_after_it() -> None:
    patch = codex("*** Update File: a.py", "@@ class A:", "+    x = 1")
    assert theirs(patch, {"a.py": SOURCE})["a.py"] == SOURCE + "    x = 1\n"
    assert ours(patch, {"a.py": SOURCE})["a.py"] == SOURCE.replace(
        "class A:\n", "class A:\n    x = 1\n"
    )


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            codex(
                "*** Update File: a.py",
                "@@ class B:",
                "@@     def f(self):",
                "-        return 1",
                "+        return 2",
            ),
            SOURCE[:-2] + "2\n",
        ),
        (
            codex(
                "*** Update File: a.py",
                "@@ -6,2 +6,2 @@",
                "     def f(self):",
                "-        return 1",
                "+        return 2",
            ),
            SOURCE[:-2] + "2\n",
        ),
        (codex("*** Update File: a.py", "*** Move to: b.py"), SOURCE),
        (
            "```\n" + codex("*** Update File: a.py", "-class A:", "+class Z:") + "\n```",
            SOURCE.replace("class A", "class Z"),
        ),
    ],
)
def test_forms_codex_rejects(patch: str, expected: str) -> None:
    with pytest.raises(RuntimeError):
        theirs(patch, {"a.py": SOURCE})
    assert list(ours(patch, {"a.py": SOURCE}).values()) == [expected]


def test_a_blank_last_line_is_kept() -> None:
    patch = codex("*** Update File: a.py", "-a", "+b")
    assert theirs(patch, {"a.py": "a\n\n"})["a.py"] == "b\n"
    assert ours(patch, {"a.py": "a\n\n"})["a.py"] == "b\n\n"


def test_appending_after_a_blank_last_line() -> None:
    patch = codex("*** Update File: a.py", "+x")
    assert theirs(patch, {"a.py": "a\n\n"})["a.py"] == "a\nx\n"
    assert ours(patch, {"a.py": "a\n\n"})["a.py"] == "a\n\nx\n"


def without_blank_last_line(text: str) -> str:
    """What Codex makes of a text ending with a blank line."""
    return text[:-1] if text.endswith("\n\n") or text == "\n" else text


def test_an_update_that_changes_nothing_is_refused() -> None:
    patch = codex("*** Update File: a.py", "-a", "+a")
    assert theirs(patch, {"a.py": "a\n"}) == {"a.py": "a\n"}
    with pytest.raises(PatchError, match=r"leaves a\.py unchanged"):
        ours(patch, {"a.py": "a\n"})


# ---------------------------------------------------------------------- generated patches

LINES = st.lists(
    st.sampled_from([f"{word}\n" for word in "abcdefgh"] + ["\n", "    i\n"]), max_size=16
)


def as_codex(diff: list[str]) -> list[list[str]]:
    """The hunks of a difflib unified diff, each headed by a bare `@@` as in the Codex format."""
    hunks: list[list[str]] = []
    for line in diff[2:]:
        if line.startswith("@@"):
            hunks.append(["@@"])
        else:
            hunks[-1].append(line.rstrip("\n"))
    return hunks


def test_hunks_after_an_appended_one_are_placed_against_the_original_lines() -> None:
    patch = codex("*** Update File: a.py", "@@", "+b", "@@", "-b", "+a", "+a")
    assert theirs(patch, {"a.py": "a\nb\n"})["a.py"] == "a\na\nb\na\n"
    assert ours(patch, {"a.py": "a\nb\n"})["a.py"] == "a\na\na\nb\n"


@settings(max_examples=300, derandomize=True, deadline=None)
@given(LINES, LINES, st.integers(0, 3))
def test_generated_patches_match_codex_when_we_accept_them(
    a: list[str], b: list[str], context: int
) -> None:
    diff = list(difflib.unified_diff(a, b, n=context))
    if not diff or a[-1:] == ["\n"]:
        return  # no change, or a blank last line (see the module docstring)
    hunks = as_codex(diff)
    if any(all(line.startswith("+") for line in hunk[1:]) for hunk in hunks[:-1]):
        return  # hunks after an appended one (see the module docstring)
    patch = codex("*** Update File: f.txt", *(line for hunk in hunks for line in hunk))
    files = {"f.txt": "".join(a)}
    try:
        result = ours(patch, files)
    except PatchError:
        return  # ambiguous without its line numbers: Codex would guess
    reference = accepted_by_codex(patch, files)
    if reference is not None:
        assert {path: without_blank_last_line(text) for path, text in result.items()} == reference
