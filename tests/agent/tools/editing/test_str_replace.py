"""edit_file's engine: exact matching, line endings kept, all or nothing, and failure messages
that point at the real text."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from opencomposer.agent.tools.editing.miss import describe_miss
from opencomposer.agent.tools.editing.str_replace import (
    Edit,
    EditError,
    EditOutcome,
    apply_edits,
)

PROPERTIES = settings(max_examples=200, derandomize=True, deadline=None)
SOURCE = "def f(a, b):\n\tif a:\n\t\treturn b\n\treturn a\n"


def error(text: str, edits: list[Edit], newline: str = "\n") -> EditError:
    with pytest.raises(EditError) as caught:
        apply_edits(text, edits, newline)
    return caught.value


# ---------------------------------------------------------------------- outcomes


def test_single_edit() -> None:
    outcome = apply_edits(SOURCE, [Edit("\t\treturn b\n", "\t\tb += 1\n\t\treturn b\n")])
    assert outcome == EditOutcome(
        text="def f(a, b):\n\tif a:\n\t\tb += 1\n\t\treturn b\n\treturn a\n",
        replacements=1,
        changed_lines=[(3, 4)],
        notes=[],
    )


def test_replace_all_counts_every_occurrence() -> None:
    outcome = apply_edits(SOURCE, [Edit("return", "yield", replace_all=True)])
    assert outcome == EditOutcome(
        text="def f(a, b):\n\tif a:\n\t\tyield b\n\tyield a\n",
        replacements=2,
        changed_lines=[(3, 3), (4, 4)],
        notes=[],
    )


def test_later_edits_shift_earlier_ranges() -> None:
    outcome = apply_edits(
        SOURCE,
        [
            Edit("\treturn a\n", "\treturn a + b\n"),
            Edit("def f(a, b):\n", '"""Doc."""\n\n\ndef f(a, b):\n'),
            Edit("\t\treturn b", ""),
        ],
    )
    assert outcome == EditOutcome(
        text='"""Doc."""\n\n\ndef f(a, b):\n\tif a:\n\n\treturn a + b\n',
        replacements=3,
        changed_lines=[(7, 7), (1, 4), (6, 6)],
        notes=[],
    )


def test_crlf_file_edited_with_lf_strings_stays_crlf() -> None:
    crlf = SOURCE.replace("\n", "\r\n")
    edit = Edit("\tif a:\n\t\treturn b\n", "\tif a:\n\t\tb += 1\n\t\treturn b\n")
    outcome = apply_edits(crlf, [edit], "\r\n")
    assert outcome == EditOutcome(
        text="def f(a, b):\r\n\tif a:\r\n\t\tb += 1\r\n\t\treturn b\r\n\treturn a\r\n",
        replacements=1,
        changed_lines=[(2, 4)],
        notes=["matched using the file's CRLF line endings"],
    )


def test_crlf_new_string_lines_get_the_files_endings() -> None:
    outcome = apply_edits("a\r\nb\r\n", [Edit("b", "b\nc")], "\r\n")
    assert outcome == EditOutcome(
        text="a\r\nb\r\nc\r\n",
        replacements=1,
        changed_lines=[(2, 3)],
        notes=["wrote new_string's line breaks as the file's CRLF line endings"],
    )


def test_spelled_out_crlf_is_taken_as_written() -> None:
    outcome = apply_edits("a\r\nb\r\n", [Edit("a\r\nb", "x\r\ny")], "\r\n")
    assert outcome == EditOutcome("x\r\ny\r\n", 1, [(1, 2)], [])


def test_cr_file() -> None:
    outcome = apply_edits("a\rb\rc\r", [Edit("a\nb", "a\nB")], "\r")
    assert outcome == EditOutcome(
        "a\rB\rc\r", 1, [(1, 2)], ["matched using the file's CR line endings"]
    )


def test_mixed_file_matches_a_region_with_the_minority_ending() -> None:
    mixed = "one\r\ntwo\r\nthree\nfour\nfive\r\n"
    outcome = apply_edits(mixed, [Edit("three\nfour", "3\n4")], "\r\n")
    assert outcome == EditOutcome("one\r\ntwo\r\n3\n4\nfive\r\n", 1, [(3, 4)], [])


def test_lf_file_with_a_crlf_region() -> None:
    outcome = apply_edits("a\nb\r\nc\r\nd\n", [Edit("b\nc", "B\nC")])
    assert outcome == EditOutcome(
        "a\nB\r\nC\r\nd\n", 1, [(2, 3)], ["matched using the file's CRLF line endings"]
    )


def test_edit_that_only_changes_line_endings_the_file_then_overrides() -> None:
    assert error("a\r\nb\r\n", [Edit("a\n", "a\r\n")], "\r\n").reason == "no_change"


def test_no_final_newline_is_kept() -> None:
    assert apply_edits("a\nb", [Edit("b", "c")]).text == "a\nc"


def test_astral_characters_and_tabs() -> None:
    text = "x = '🐍'\n\tname = 'é𝄞'\n"
    outcome = apply_edits(text, [Edit("'🐍'", "'🦀🐍'"), Edit("\tname = 'é𝄞'", "\tname = '𝄞'")])
    assert outcome == EditOutcome("x = '🦀🐍'\n\tname = '𝄞'\n", 2, [(1, 1), (2, 2)], [])


def test_deletion_reports_the_line_it_happened_on() -> None:
    assert apply_edits("a\nb\nc\n", [Edit("b\n", "")]).changed_lines == [(2, 2)]


# ---------------------------------------------------------------------- errors


def test_empty_old_string() -> None:
    caught = error(SOURCE, [Edit("", "x")])
    assert (caught.reason, caught.edit_index, caught.message) == (
        "empty_old_string",
        0,
        "old_string is empty. To create a file or replace all of its content, use write_file.",
    )


def test_no_change() -> None:
    caught = error(SOURCE, [Edit("if a:", "if a:")])
    assert (caught.reason, caught.message) == (
        "no_change",
        "old_string and new_string are identical, so the edit would change "
        "nothing. If the file already has the intended text, no edit is needed.",
    )


def test_multiple_matches_lists_lines() -> None:
    caught = error("x\n" * 15, [Edit("x", "y")])
    assert (caught.reason, caught.message) == (
        "multiple_matches",
        "old_string occurs 15 times (starting at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 5 more). "
        "Add surrounding lines to old_string to make it unique, or set replace_all to replace "
        "every one.",
    )


def test_overlapping_occurrences_are_ambiguous() -> None:
    assert error("aaa", [Edit("aa", "b")]).reason == "multiple_matches"


def test_edit_touching_an_earlier_edits_text_is_an_overlap() -> None:
    caught = error(
        SOURCE, [Edit("return", "yield", replace_all=True), Edit("yield b", "pass"), Edit("a", "c")]
    )
    assert (caught.reason, caught.edit_index, caught.message) == (
        "overlap",
        1,
        "Edit 2 of 3: old_string matches text that edit 1 of this call wrote (line 3). Each edit "
        "must target text the earlier edits left alone; merge the two into one edit. Line "
        "numbers are as they would be after edit 1. No edit was applied.",
    )


def test_no_match_names_tabs_against_spaces() -> None:
    caught = error(SOURCE, [Edit("\tif a:\n        return b", "x")])
    assert (caught.reason, caught.message) == (
        "no_match",
        "old_string was not found in the file. It matches only with different indentation: the "
        "file indents line 3 with tabs, old_string with spaces.\n"
        "  2| \tif a:\n"
        "  3| \t\treturn b",
    )


def test_nth_edit_message_counts_lines_after_earlier_edits() -> None:
    caught = error(
        SOURCE, [Edit("if a:", "if a and b:"), Edit("if a:\n\t\treturn b", "x"), Edit("b", "c")]
    )
    assert (caught.reason, caught.edit_index, caught.message) == (
        "no_match",
        1,
        "Edit 2 of 3: old_string was not found in the file. The closest text is at lines 2-3; "
        "the first difference is at line 2, where the file has '\\tif a and b:' and old_string "
        "has 'if a:'.\n"
        "  2| \tif a and b:\n"
        "  3| \t\treturn b\n"
        "Line numbers are as they would be after edit 1. No edit was applied.",
    )


@pytest.mark.parametrize(
    ("text", "old", "explanation"),
    [
        (
            "a = 1  \nb = 2\n",
            "a = 1\nb = 2",
            "It matches only if trailing whitespace is ignored: file line 1 ends with '  ', "
            "old_string has '' there.",
        ),
        (
            "    if x:\n        y()\n",
            "  if x:\n      y()",
            "It matches only with different indentation: file line 2 starts with 8 spaces, "
            "old_string has 6 spaces there.",
        ),
        (
            'say("hi")\n',
            "say(“hi”)",
            "It matches only if quotes and dashes are ignored: old_string has typographic "
            "characters (“ ”) where the file has ASCII.",
        ),
        (
            "say(\u2018hi\u2019)\n",
            "say('hi')",
            "It matches only if quotes and dashes are ignored: the file has typographic characters "
            "(\u2018 \u2019) where old_string has ASCII.",
        ),
        (
            "a = 1\nb = 2\n",
            "a = 1\\nb = 2",
            "old_string contains a literal backslash-n (\\n) where the file has a line break; "
            "write "
            "real line breaks.",
        ),
        ("a = 1\nb = 2", "b = 2\n", "It matches only without its trailing '\\n'."),
        (
            "a = 1\nb = 2\n",
            "   1| a = 1\n   2| b = 2",
            "old_string includes line-number prefixes like '   1| '; leave them out.",
        ),
        (
            "a\r\nb\nc\r\n",
            "a\nb\nc",
            "It matches only if line endings are ignored: old_string uses LF, the file's lines 1-3 "
            "end with CRLF and LF.",
        ),
    ],
)
def test_no_match_names_the_difference(text: str, old: str, explanation: str) -> None:
    message = error(text, [Edit(old, "x")], "\r\n" if "\r\n" in text else "\n").message
    assert message.split("\n")[0] == f"old_string was not found in the file. {explanation}"


def test_no_match_in_an_empty_file() -> None:
    assert error("", [Edit("x", "y")]).message == (
        "old_string was not found in the file. The file is empty."
    )


def test_no_match_with_nothing_similar() -> None:
    assert error(SOURCE, [Edit("completely unrelated words", "y")]).message == (
        "old_string was not found in the file. Nothing similar is in the file; read it again "
        "before editing."
    )


def test_closest_region_shows_at_most_a_dozen_lines_around_the_difference() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 41))
    wanted = text.replace("line 30\n", "line thirty\n").split("\n", 9)[-1]  # lines 10-40
    message = describe_miss(text, wanted, "old_string")
    assert message == (
        "The closest text is at lines 10-40; the first difference is at line 30, where the file "
        "has 'line 30' and old_string has 'line thirty'.\n"
        + "\n".join(f"  {n}| line {n}" for n in range(27, 39))
    )


def test_long_lines_are_cut_in_messages() -> None:
    line = "x = [" + "1, " * 200 + "]"
    message = describe_miss(line + "\n", line.replace("[", "("), "old_string")
    clipped = line[:240] + " [... 366 more characters]"
    assert message == (
        f"The closest text is at line 1; the first difference is at line 1, where the file has "
        f"{clipped!r} and old_string has {clipped.replace('[', '(', 1)!r}.\n  1| {clipped}"
    )


# ---------------------------------------------------------------------- properties

ALPHABET = st.sampled_from(["a", "b", " ", "\t", "\n", "é", "🐍"])
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)


def occurrences(text: str, part: str) -> int:
    return sum(text.startswith(part, i) for i in range(len(text)))


@st.composite
def unique_part(draw: st.DrawFn) -> tuple[str, str]:
    """A text and a non-empty substring that occurs in it exactly once."""
    text = draw(TEXTS.filter(bool))
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    part = text[start:end]
    assume(occurrences(text, part) == 1)
    return text, part


@PROPERTIES
@given(unique_part(), TEXTS, st.sampled_from(["\n", "\r\n"]))
def test_an_edit_and_its_inverse_restore_the_bytes(
    case: tuple[str, str], new: str, newline: str
) -> None:
    text, old = case
    assume(new and new != old)
    file = text.replace("\n", newline)
    edited = apply_edits(file, [Edit(old, new)], newline).text
    assume(occurrences(edited, new.replace("\n", newline)) == 1)
    assert apply_edits(edited, [Edit(new, old)], newline).text == file


@PROPERTIES
@given(unique_part(), TEXTS)
def test_a_unique_edit_is_str_replace_once(case: tuple[str, str], new: str) -> None:
    text, old = case
    assume(new != old)
    assert apply_edits(text, [Edit(old, new)]).text == text.replace(old, new, 1)


@PROPERTIES
@given(TEXTS, st.lists(st.tuples(TEXTS, TEXTS, st.booleans()), max_size=4), st.integers(0, 4))
def test_a_failing_edit_fails_the_whole_list(
    text: str, pairs: list[tuple[str, str, bool]], failing_at: int
) -> None:
    edits = [Edit(old, new, everywhere) for old, new, everywhere in pairs]
    failing_at = min(failing_at, len(edits))
    edits.insert(failing_at, Edit("\x00absent", "x"))  # never in TEXTS, so never matches
    with pytest.raises(EditError) as caught:
        apply_edits(text, edits)
    # One at a time, the same edit fails first (an overlap can only show up in the batch).
    current = text
    for index, edit in enumerate(edits):
        try:
            current = apply_edits(current, [edit]).text
        except EditError as single:
            assert caught.value.edit_index <= index
            if caught.value.reason != "overlap":
                assert (caught.value.edit_index, caught.value.reason) == (index, single.reason)
            break
