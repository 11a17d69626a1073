"""apply_patch's engine: both patch formats parsed strictly, hunks placed exactly (or ignoring
trailing whitespace, with a note), file formats kept, and the whole patch refused on any error."""

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opencomposer.agent.tools.editing.patch_format import (
    AddFile,
    DeleteFile,
    Hunk,
    HunkAdjustment,
    PatchError,
    PlannedChange,
    UpdateFile,
)
from opencomposer.agent.tools.editing.patch_parse import parse_patch
from opencomposer.agent.tools.editing.patch_plan import plan_patch

PROPERTIES = settings(max_examples=200, derandomize=True, deadline=None)
SOURCE = (
    "class A:\n    def f(self):\n        return 1\n\nclass B:\n    def f(self):\n        return 1\n"
)


def plan(patch: str, files: dict[str, str]) -> tuple[list[PlannedChange], list[str]]:
    return plan_patch(parse_patch(patch), files.get)


def new_text(patch: str, text: str, path: str = "a.py") -> str | None:
    changes, _ = plan(patch, {path: text})
    return changes[0].new_text


def failure(patch: str, files: dict[str, str]) -> PatchError:
    with pytest.raises(PatchError) as caught:
        plan(patch, files)
    return caught.value


def codex(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"])


# ---------------------------------------------------------------------- parsing


def test_parse_codex_patch() -> None:
    patch = codex(
        "*** Add File: new.txt",
        "+one",
        "+two",
        "*** Delete File: old.txt",
        "*** Update File: a.py",
        "*** Move to: b.py",
        "@@ class B:",
        "@@     def f(self):",
        "-        return 1",
        "+        return 2",
        "@@",
        " x",
        "",
        "-y",
        "*** End of File",
    )
    assert parse_patch(patch) == [
        AddFile("new.txt", "one\ntwo\n"),
        DeleteFile("old.txt"),
        UpdateFile(
            "a.py",
            [
                Hunk(
                    [("-", "        return 1"), ("+", "        return 2")],
                    anchors=["class B:", "    def f(self):"],
                    patch_line=8,
                ),
                Hunk([(" ", "x"), (" ", ""), ("-", "y")], at_end=True, patch_line=12),
            ],
            move_to="b.py",
        ),
    ]


def test_parse_git_diff() -> None:
    patch = "\n".join(
        [
            "diff --git a/src/x.py b/src/x.py",
            "index 83db48f..bf269f4 100644",
            "--- a/src/x.py",
            "+++ b/src/x.py",
            "@@ -3,3 +3,3 @@ def f():",
            " a",
            "-b",
            "+c",
            " d",
            "diff --git a/new.txt b/new.txt",
            "new file mode 100644",
            "--- /dev/null",
            "+++ b/new.txt",
            "@@ -0,0 +1 @@",
            "+hello",
            "\\ No newline at end of file",
            "diff --git a/gone.txt b/gone.txt",
            "deleted file mode 100644",
            "index e69de29..0000000",
            "diff --git a/old name.txt b/new name.txt",
            "similarity index 100%",
            "rename from old name.txt",
            "rename to new name.txt",
            'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"',
            "new file mode 100644",
            "index 0000000..e69de29",
        ]
    )
    assert parse_patch(patch) == [
        UpdateFile(
            "src/x.py",
            [Hunk([(" ", "a"), ("-", "b"), ("+", "c"), (" ", "d")], hint=2, patch_line=5)],
        ),
        AddFile("new.txt", "hello"),
        DeleteFile("gone.txt"),
        UpdateFile("old name.txt", [], move_to="new name.txt"),
        AddFile("café.txt", ""),
    ]


def test_parse_plain_unified_diff_in_a_fence() -> None:
    patch = "```diff\n--- x.txt\t2024-01-01\n+++ x.txt\t2024-01-02\n@@ -1 +1 @@\n-a\n+b\n```\n"
    assert parse_patch(patch) == [
        UpdateFile("x.txt", [Hunk([("-", "a"), ("+", "b")], hint=0, patch_line=4)])
    ]


def test_hunk_counts_decide_where_a_hunk_ends() -> None:
    """Removing "-- b" and adding "++ c" reads like a file header; the counts say otherwise."""
    patch = "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n--- b\n+++ c\n d\n"
    assert parse_patch(patch)[0].chunks[0].lines == [
        (" ", "a"),
        ("-", "-- b"),
        ("+", "++ c"),
        (" ", "d"),
    ]


def test_miscounted_hunks_run_to_the_next_header() -> None:
    patch = (
        "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n a\n-b\n+c\n d\n\n"
        "--- a/y\n+++ b/y\n@@ -1 +1 @@\n-e\n+f\n"
    )
    assert [op.chunks[0].lines for op in parse_patch(patch)] == [
        [(" ", "a"), ("-", "b"), ("+", "c"), (" ", "d")],
        [("-", "e"), ("+", "f")],
    ]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("", "The patch is empty."),
        (codex(), "The patch has no file operations."),
        (
            "*** Begin Patch\n*** Update File: a.py\n-a\n+b",
            "Patch line 4: the patch must end with '*** End Patch'.",
        ),
        (
            codex("*** Update File: a.py", "@@", "-a", "+x", "foo"),
            "Patch line 6: unexpected line 'foo' in the update of a.py. Hunk lines start with ' ' "
            "(context), '-' (removed) or '+' (added).",
        ),
        (
            codex("*** Add File: a.py", "hello"),
            "Patch line 3: unexpected line 'hello'. Expected '*** Add File: ', '*** Delete File: "
            "', "
            "'*** Update File: ' or '*** End Patch'; lines of an added file start with '+'.",
        ),
        (codex("*** Update File: a.py"), "Patch line 2: the update of a.py has no hunks."),
        (
            codex("*** Update File: a.py", "@@ def f():", "*** End of File"),
            "Patch line 3: a hunk of a.py has no lines.",
        ),
        (
            codex("*** Update File: a.py", "-a", "*** End of File", "-b"),
            "Patch line 5: expected '@@' to start the next hunk of a.py, found '-b'.",
        ),
        (
            codex("*** Frobnicate File: a.py"),
            "Patch line 2: unexpected line '*** Frobnicate File: a.py'. Expected '*** Add File: ', "
            "'*** Delete File: ', '*** Update File: ' or '*** End Patch'; lines of an added file "
            "start with '+'.",
        ),
        (
            "Here is the fix:\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
            "Patch line 1: 'Here is the fix:' is not part of a patch. Write either '*** Begin "
            "Patch' "
            "... '*** End Patch' or a unified diff ('--- a/x', '+++ b/x', '@@' hunks).",
        ),
        (
            "--- a/x\n+++ b/x\n@@ -1 @@\n-a\n",
            "Patch line 3: malformed hunk header '@@ -1 @@'; expected '@@ -start,count "
            "+start,count "
            "@@'.",
        ),
        (
            "--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
            "Patch line 1: the old and new names differ (x, y). To rename a file, add 'rename "
            "from'/'rename to' lines (or use '*** Move to:').",
        ),
        (
            "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n",
            "Patch line 1: the diff of x has no hunks (mode changes are not supported).",
        ),
        (
            "diff --git a/x b/x\nGIT binary patch\nliteral 0\n",
            "Patch line 2: binary patches are not supported.",
        ),
    ],
)
def test_parse_errors(patch: str, message: str) -> None:
    with pytest.raises(PatchError) as caught:
        parse_patch(patch)
    assert caught.value.message == message


# ---------------------------------------------------------------------- planning


def test_plan_every_kind_of_change() -> None:
    patch = codex(
        "*** Add File: docs/new.md",
        "+# New",
        "*** Delete File: old.txt",
        "*** Update File: a.py",
        "@@ class B:",
        "-        return 1",
        "+        return 2",
        "*** Update File: c.py",
        "*** Move to: d.py",
        "@@",
        "-x = 1",
        "+x = 2",
    )
    files = {"old.txt": "bye\n", "a.py": SOURCE, "c.py": "x = 1\n"}
    assert plan(patch, files) == (
        [
            PlannedChange("docs/new.md", "add", None, "# New\n"),
            PlannedChange("old.txt", "delete", "bye\n", None),
            PlannedChange("a.py", "update", SOURCE, SOURCE[:-2] + "2\n"),
            PlannedChange("c.py", "move", "x = 1\n", "x = 2\n", move_to="d.py"),
        ],
        [],
    )


def test_crlf_file_stays_crlf() -> None:
    text = SOURCE.replace("\n", "\r\n")
    patch = codex(
        "*** Update File: a.py",
        "@@ class A:",
        "     def f(self):",
        "-        return 1",
        "+        x = 1",
        "+        return x",
    )
    assert plan(patch, {"a.py": text}) == (
        [
            PlannedChange(
                "a.py",
                "update",
                text,
                text.replace("        return 1\r\n", "        x = 1\r\n        return x\r\n", 1),
            )
        ],
        ["a.py: added lines use the file's CRLF line endings."],
    )


def test_mixed_endings_keep_each_untouched_line_as_it_was() -> None:
    text = "a\r\nb\nc\r\nd\r\n"
    patch = codex("*** Update File: a.py", " a", " b", "-c", "+C", "+C2", " d")
    assert new_text(patch, text) == "a\r\nb\nC\r\nC2\r\nd\r\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\nb\nc", "a\nB\nc"),
        ("a\nb\nc\n", "a\nB\nc\n"),
    ],
)
def test_final_newline_is_kept_as_it_was(text: str, expected: str) -> None:
    assert new_text(codex("*** Update File: a.py", " a", "-b", "+B"), text) == expected


def test_appending_to_a_file_without_final_newline() -> None:
    assert new_text(codex("*** Update File: a.py", "+c"), "a\nb") == "a\nb\nc"


@pytest.mark.parametrize(
    ("hunk", "text", "expected"),
    [
        # The new side says "no newline at end of file": drop it.
        ([" a", "-b", "+b", "\\ No newline at end of file"], "a\nb\n", "a\nb"),
        # The old side said so and the new side does not: add it.
        ([" a", "-b", "\\ No newline at end of file", "+b"], "a\nb", "a\nb\n"),
        # Context at the end without a final newline stays without one.
        (["-a", "+A", " b", "\\ No newline at end of file"], "a\nb", "A\nb"),
    ],
)
def test_no_newline_markers(hunk: list[str], text: str, expected: str) -> None:
    patch = "\n".join(["--- a/a.py", "+++ b/a.py", "@@ -1,2 +1,2 @@", *hunk])
    assert new_text(patch, text) == expected


def test_trailing_whitespace_is_ignored_with_a_note_and_context_is_kept() -> None:
    patch = codex("*** Update File: a.py", " a", "-b", "+c")
    assert plan(patch, {"a.py": "a  \nb\t\n"}) == (
        [
            PlannedChange(
                "a.py",
                "update",
                "a  \nb\t\n",
                "a  \nc\n",
                adjusted=(
                    HunkAdjustment(1, header_line=None, applied_line=1, ignored_whitespace=True),
                ),
            )
        ],
        ["a.py: hunk 1 matched only after ignoring trailing whitespace."],
    )


def test_a_hunk_found_away_from_its_header_line_is_applied_and_reported() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 21))
    patch = (
        "--- a/a.py\n+++ b/a.py\n"
        "@@ -3,2 +3,2 @@\n line 12\n-line 13\n+LINE 13\n"  # really at line 12
        "@@ -15,2 +15,2 @@\n line 15\n-line 16\n+LINE 16\n"  # where it says
        "@@ -19,1 +19,1 @@\n-line 18  \n+LINE 18\n"
    )  # 18, and whitespace
    changes, notes = plan(patch, {"a.py": text})
    assert changes[0].new_text == text.replace("line 13", "LINE 13").replace(
        "line 16", "LINE 16"
    ).replace("line 18", "LINE 18")
    assert changes[0].adjusted == (
        HunkAdjustment(1, header_line=3, applied_line=12),
        HunkAdjustment(3, header_line=19, applied_line=18, ignored_whitespace=True),
    )
    assert notes == [
        "a.py: hunk 1 applied at line 12, not at line 3 where its header puts it; check that "
        "this is the place you meant.",
        "a.py: hunk 3 applied at line 18, not at line 19 where its header puts it; check that "
        "this is the place you meant.",
        "a.py: hunk 3 matched only after ignoring trailing whitespace.",
    ]


def test_hunks_without_line_numbers_are_not_reported_as_moved() -> None:
    changes, notes = plan(
        codex(
            "*** Update File: a.py",
            "@@ class B:",
            "     def f(self):",
            "-        return 1",
            "+        return 2",
        ),
        {"a.py": SOURCE},
    )
    assert (changes[0].adjusted, notes) == ((), [])
    inserted, notes = plan("--- a/a.py\n+++ b/a.py\n@@ -1,0 +2 @@\n+x\n", {"a.py": "a\nb\n"})
    assert (inserted[0].adjusted, notes) == ((), [])


def test_astral_characters_and_tabs() -> None:
    text = "def f():\n\treturn '🐍'\n"
    patch = codex("*** Update File: a.py", " def f():", "-\treturn '🐍'", "+\treturn '🦀𝄞'")
    assert new_text(patch, text) == "def f():\n\treturn '🦀𝄞'\n"


def test_blank_line_between_hunks_is_a_separator() -> None:
    patch = codex("*** Update File: a.py", "@@", "-a", "+A", "", "@@", "-c", "+C")
    assert new_text(patch, "a\nb\nc\n") == "A\nb\nC\n"


def test_end_of_file_marker_picks_the_last_occurrence() -> None:
    patch = codex("*** Update File: a.py", "@@", "-x", "+y", "*** End of File")
    assert new_text(patch, "x\nx\n") == "x\ny\n"


def test_anchor_with_only_added_lines_inserts_after_it() -> None:
    patch = codex("*** Update File: a.py", "@@ class B:", "+    '''Doc.'''")
    assert new_text(patch, SOURCE) == SOURCE.replace("class B:\n", "class B:\n    '''Doc.'''\n")


def test_unified_line_numbers_choose_between_equal_contexts() -> None:
    text = "x\ny\nx\ny\nx\ny\n"
    patch = "--- a/a.py\n+++ b/a.py\n@@ -3,2 +3,2 @@\n x\n-y\n+Y\n"
    assert new_text(patch, text) == "x\ny\nx\nY\nx\ny\n"


def test_unified_insertion_uses_its_line_number() -> None:
    patch = "--- a/a.py\n+++ b/a.py\n@@ -1,0 +2 @@\n+inserted\n"
    assert new_text(patch, "a\nb\n") == "a\ninserted\nb\n"


def test_git_rename_with_changes() -> None:
    patch = "\n".join(
        [
            "diff --git a/old.py b/new.py",
            "similarity index 80%",
            "rename from old.py",
            "rename to new.py",
            "index 1..2 100644",
            "--- a/old.py",
            "+++ b/new.py",
            "@@ -1,2 +1,2 @@",
            " a",
            "-b",
            "+c",
        ]
    )
    assert plan(patch, {"old.py": "a\nb\n"}) == (
        [PlannedChange("old.py", "move", "a\nb\n", "a\nc\n", move_to="new.py")],
        [],
    )


def test_codex_hunk_with_a_unified_header_inserts_at_its_line() -> None:
    patch = codex("*** Update File: a.py", "@@ -1,0 +2 @@", "+inserted")
    assert new_text(patch, "a\nb\n") == "a\ninserted\nb\n"


def test_pure_rename() -> None:
    patch = "diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\n"
    assert plan(patch, {"x": "same\n"}) == (
        [PlannedChange("x", "move", "same\n", "same\n", move_to="y")],
        [],
    )


# ---------------------------------------------------------------------- planning errors


@pytest.mark.parametrize(
    ("patch", "files", "path", "message"),
    [
        (
            codex("*** Add File: a.py", "+x"),
            {"a.py": "old\n"},
            "a.py",
            "Cannot add a.py: it already exists; update it instead. No file was changed.",
        ),
        (
            codex("*** Update File: a.py", "-x"),
            {},
            "a.py",
            "Cannot update a.py: it does not exist; add it instead. No file was changed.",
        ),
        (
            codex("*** Delete File: a.py"),
            {},
            "a.py",
            "Cannot delete a.py: it does not exist. No file was changed.",
        ),
        (
            codex("*** Update File: a.py", "*** Move to: b.py", "-x", "+y"),
            {"a.py": "x\n", "b.py": ""},
            "a.py",
            "Cannot move a.py to b.py: b.py already exists. No file was changed.",
        ),
        (
            codex("*** Update File: a.py", "-x", "+y", "*** Delete File: ./a.py"),
            {"a.py": "x\n"},
            "./a.py",
            "The patch changes ./a.py more than once; put all of its changes in one file "
            "section. No file was changed.",
        ),
        (
            codex("*** Update File: a.py", "-x", "+x"),
            {"a.py": "x\n"},
            "a.py",
            "The patch leaves a.py unchanged (its removed and added lines are the same). If the "
            "file "
            "already has the intended text, no patch is needed. No file was changed.",
        ),
        (
            codex(
                "*** Update File: a.py",
                "     def f(self):",
                "-        return 1",
                "+        return 2",
            ),
            {"a.py": SOURCE},
            "a.py",
            "a.py, hunk 1 of 1 (patch line 3): its lines match in 2 places (lines 2, 6). Add an "
            "'@@ "
            "<line>' naming the enclosing class or function, or more context lines, to make it "
            "unique. No file was changed.",
        ),
        (
            codex("*** Update File: a.py", "@@", "-b", "+B", "@@", "-a", "+A"),
            {"a.py": "a\nb\n"},
            "a.py",
            "a.py, hunk 2 of 2 (patch line 6): its lines are at line 1, before the end of the "
            "previous hunk (line 2); hunks must be in file order. No file was changed.",
        ),
        (
            codex("*** Update File: a.py", "@@ class C:", "-        return 1", "+        return 2"),
            {"a.py": SOURCE},
            "a.py",
            "a.py, hunk 1 of 1 (patch line 3): its @@ line 'class C:' was not found. The closest "
            "text "
            "is at line 5; the first difference is at line 5, where the file has 'class B:' and "
            "the "
            "@@ line has 'class C:'.\n"
            "  5| class B:\n"
            "No file was changed.",
        ),
    ],
)
def test_plan_errors(patch: str, files: dict[str, str], path: str, message: str) -> None:
    caught = failure(patch, files)
    assert (caught.path, caught.message) == (path, message)


def test_hunk_not_found_shows_the_expected_and_the_real_lines() -> None:
    patch = codex(
        "*** Update File: a.py",
        "@@ class B:",
        "     def f(self):",
        "-        return 2",
        "+        return 3",
    )
    assert failure(patch, {"a.py": SOURCE}).message == (
        "a.py, hunk 1 of 1 (patch line 3): its lines were not found. The closest text is at "
        "lines 2-3; the first difference is at line 3, where the file has '        return 1' "
        "and the hunk has '        return 2'.\n"
        "  2|     def f(self):\n"
        "  3|         return 1\n"
        "No file was changed."
    )


def test_hunk_with_tabs_for_spaces_says_so() -> None:
    patch = codex("*** Update File: a.py", " class A:", "-\tdef f(self):", "+\tdef g(self):")
    assert failure(patch, {"a.py": SOURCE}).message.split("\n")[0] == (
        "a.py, hunk 1 of 1 (patch line 3): its lines were not found. It matches only with "
        "different indentation: the file indents line 2 with spaces, the hunk with tabs."
    )


def test_one_bad_hunk_refuses_the_whole_patch() -> None:
    patch = codex("*** Add File: new.txt", "+x", "*** Update File: a.py", "-missing", "+y")
    with pytest.raises(PatchError):
        plan(patch, {"a.py": SOURCE})


# ---------------------------------------------------------------------- properties

LINES = st.lists(st.sampled_from(["a\n", "b\n", "\n", "  c\n", "\td\n", "é🐍\n"]), max_size=14)


@PROPERTIES
@given(LINES, LINES, st.sampled_from(["\n", "\r\n"]), st.integers(0, 3))
def test_difflib_unified_diff_applies_exactly(
    a: list[str], b: list[str], newline: str, context: int
) -> None:
    diff = "".join(difflib.unified_diff(a, b, "a/f.txt", "b/f.txt", n=context))
    if not diff:
        return
    newline = newline if a else "\n"  # an empty file has no line-ending style to keep
    old = "".join(a).replace("\n", newline)
    changes, _ = plan(diff, {"f.txt": old})
    assert changes == [PlannedChange("f.txt", "update", old, "".join(b).replace("\n", newline))]
