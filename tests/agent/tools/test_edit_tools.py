"""edit_file and apply_patch through the harness: exact, atomic, format-preserving, undoable."""

import codecs
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opencomposer.agent.protocol.items import FileChange, FileChangeKind
from opencomposer.agent.tools.harness import ToolHarness
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings


async def test_edit_replaces_once_and_shows_the_result(harness, root: Path):
    (root / "a.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    outcome = await harness.call(
        "edit_file", {"path": "a.py", "old_string": "return 1", "new_string": "return 10"}
    )
    assert outcome.ok, outcome.text
    assert outcome.text == (
        "Edited a.py: 1 replacement.\n     1\tdef f():\n     2\t    return 10\n     3\t\n     4\t"
    )
    assert (root / "a.py").read_text().startswith("def f():\n    return 10\n")
    assert outcome.fields["changes"] == [
        FileChange(
            path="a.py",
            kind=FileChangeKind.update,
            diff="--- a/a.py\n+++ b/a.py\n@@ -1,5 +1,5 @@\n def f():\n-    return 1\n"
            "+    return 10\n \n \n def g():\n",
        )
    ]


async def test_failed_edits_change_nothing(harness, root: Path):
    original = b"x = 1\nx = 1\ny = 2\n"
    (root / "a.py").write_bytes(original)
    ambiguous = await harness.call(
        "edit_file", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 3"}
    )
    assert ambiguous.error.kind == "conflict"
    assert "old_string occurs 2 times (starting at lines 1, 2)" in ambiguous.text
    batch = await harness.call(
        "edit_file",
        {
            "path": "a.py",
            "edits": [
                {"old_string": "y = 2", "new_string": "y = 20"},
                {"old_string": "z = 9", "new_string": "z = 0"},
            ],
        },
    )
    assert batch.error.kind == "conflict" and "Edit 2 of 2" in batch.text
    same = await harness.call(
        "edit_file", {"path": "a.py", "old_string": "y = 2", "new_string": "y = 2"}
    )
    assert same.error.kind == "invalid_arguments"
    both = await harness.call(
        "edit_file",
        {
            "path": "a.py",
            "old_string": "a",
            "new_string": "b",
            "edits": [{"old_string": "a", "new_string": "b"}],
        },
    )
    assert both.error.kind == "invalid_arguments"
    missing = await harness.call(
        "edit_file", {"path": "nope.py", "old_string": "a", "new_string": "b"}
    )
    assert "write_file" in missing.text
    assert (root / "a.py").read_bytes() == original


@pytest.mark.parametrize(
    ("original", "expected"),
    [
        (b"a = 1\r\nb = 2\r\n", b"a = 1\r\nb = 3\r\nc = 4\r\n"),
        (codecs.BOM_UTF8 + b"a = 1\nb = 2", codecs.BOM_UTF8 + b"a = 1\nb = 3\nc = 4"),
        ("a = 1\r\nb = 2\r\n".encode("utf-16"), "a = 1\r\nb = 3\r\nc = 4\r\n".encode("utf-16")),
        ("a = 'é'\nb = 2\n".encode("cp1252"), "a = 'é'\nb = 3\nc = 4\n".encode("cp1252")),
    ],
)
async def test_edits_keep_the_file_format(harness, root: Path, original, expected):
    (root / "f.py").write_bytes(original)
    outcome = await harness.call(
        "edit_file", {"path": "f.py", "old_string": "b = 2", "new_string": "b = 3\nc = 4"}
    )
    assert outcome.ok, outcome.text
    assert (root / "f.py").read_bytes() == expected


@pytest.mark.parametrize(
    ("encoding", "text", "old", "new"),
    [
        ("latin-1", "café au lait\n", "lait", "crème brûlée, à la française"),
        ("latin-1", "Grüße aus München\n", "München", "Köln für 5 €"),  # € only in cp1252
        ("cp1252", "print(\u201cHi\u201d)\n", "Hi", "Ça coûte 5 €"),
        (
            "cp1251",
            "Привет, мир! Это тестовый файл на русском языке, достаточно длинный для "
            "определения кодировки.\n",
            "мир",
            "дорогой друг",
        ),
    ],
)
async def test_edits_adding_characters_the_files_code_page_holds_succeed(
    harness, root: Path, encoding: str, text: str, old: str, new: str
):
    (root / "legacy.txt").write_bytes(text.encode(encoding))
    outcome = await harness.call(
        "edit_file", {"path": "legacy.txt", "old_string": old, "new_string": new}
    )
    assert outcome.ok, outcome.text
    expected = text.replace(old, new)
    assert (root / "legacy.txt").read_bytes() == expected.encode(
        "cp1252" if encoding == "latin-1" else encoding
    )
    read = await harness.call("read_file", {"path": "legacy.txt"})
    assert expected.rstrip("\n") in read.text


async def test_a_unified_diff_applied_away_from_its_line_numbers_says_so(harness, root: Path):
    (root / "a.py").write_text("".join(f"x{n} = {n}\n" for n in range(1, 31)))
    patch = "--- a/a.py\n+++ b/a.py\n@@ -5,3 +5,3 @@\n x19 = 19\n-x20 = 20\n+x20 = 0\n x21 = 21\n"
    outcome = await harness.call("apply_patch", {"patch": patch})
    assert outcome.ok, outcome.text
    assert "x20 = 0\n" in (root / "a.py").read_text()
    assert outcome.text == (
        "Applied patch: update a.py.\n"
        "a.py: hunk 1 applied at line 19, not at line 5 where its header puts it; check that "
        "this is the place you meant."
    )
    assert outcome.data == {
        "adjusted_hunks": [
            {
                "path": "a.py",
                "hunk": 1,
                "header_line": 5,
                "applied_line": 19,
                "ignored_whitespace": False,
            }
        ]
    }
    at_its_line = patch.replace("-5,3 +5,3", "-19,3 +19,3").replace(
        "-x20 = 20\n+x20 = 0", "-x20 = 0\n+x20 = 1"
    )
    exact = await harness.call("apply_patch", {"patch": at_its_line})
    assert exact.ok and exact.data == {"adjusted_hunks": []}, exact.text


async def test_apply_patch_across_files_atomically(harness, root: Path):
    (root / "a.py").write_text("one\ntwo\nthree\n")
    (root / "old.py").write_text("moved\n")
    (root / "gone.py").write_text("bye\n")
    patch = (
        "*** Begin Patch\n*** Update File: a.py\n@@\n one\n-two\n+TWO\n three\n"
        "*** Add File: new/b.py\n+hello\n*** Delete File: gone.py\n"
        "*** Update File: old.py\n*** Move to: renamed.py\n@@\n-moved\n+moved!\n"
        "*** End Patch\n"
    )
    outcome = await harness.call("apply_patch", {"patch": patch})
    assert outcome.ok, outcome.text
    assert outcome.text == (
        "Applied patch: update a.py, add new/b.py, delete gone.py, move old.py -> renamed.py."
    )
    assert (root / "a.py").read_text() == "one\nTWO\nthree\n"
    assert (root / "new/b.py").read_text() == "hello\n"
    assert not (root / "gone.py").exists() and not (root / "old.py").exists()
    assert (root / "renamed.py").read_text() == "moved!\n"
    await harness.undo("edit")
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == ["a.py", "gone.py", "old.py"]
    assert (root / "a.py").read_text() == "one\ntwo\nthree\n"


async def test_an_invalid_patch_touches_nothing(harness, root: Path):
    (root / "a.py").write_text("one\ntwo\n")
    patch = (
        "*** Begin Patch\n*** Add File: fresh.py\n+x\n*** Update File: a.py\n@@\n-nine\n"
        "+ten\n*** End Patch\n"
    )
    outcome = await harness.call("apply_patch", {"patch": patch})
    assert outcome.error.kind == "invalid_arguments"
    assert not (root / "fresh.py").exists() and (root / "a.py").read_text() == "one\ntwo\n"
    escape = await harness.call(
        "apply_patch", {"patch": "*** Begin Patch\n*** Add File: ../evil.py\n+x\n*** End Patch\n"}
    )
    assert escape.error.kind == "denied" and not (root.parent / "evil.py").exists()


async def test_unified_diffs_apply_too(harness, root: Path):
    (root / "a.txt").write_bytes(b"alpha\r\nbeta\r\n")
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n"
    outcome = await harness.call("apply_patch", {"patch": diff})
    assert outcome.ok, outcome.text
    assert (root / "a.txt").read_bytes() == b"alpha\r\ngamma\r\n"


lines = st.lists(st.text(alphabet="abc \t", min_size=0, max_size=6), min_size=1, max_size=8)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(before=lines, newline=st.sampled_from(["\n", "\r\n"]), data=st.data())
async def test_edit_then_undo_is_byte_identical(tmp_path: Path, before, newline, data):
    root = tmp_path / f"w{abs(hash((tuple(before), newline)))}"
    root.mkdir(exist_ok=True)
    original = newline.join(before).encode() + b"!"
    (root / "f.txt").write_bytes(original)
    harness = ToolHarness(Workspace(root), ToolSettings(), tmp_path / "data")
    text = original.decode()
    start = data.draw(st.integers(0, len(text) - 1))
    old = text[start : start + data.draw(st.integers(1, 4))]
    outcome = await harness.call(
        "edit_file",
        {"path": "f.txt", "old_string": old, "new_string": old + "Z", "replace_all": True},
    )
    if outcome.ok:
        assert (root / "f.txt").read_bytes() != original
        await harness.undo("edit")
    assert (root / "f.txt").read_bytes() == original
    await harness.close()
