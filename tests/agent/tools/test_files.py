"""read_file, write_file, delete_file and move_file through the harness."""

import codecs
from pathlib import Path

import pytest

from opencomposer.agent.protocol.common import LineRange
from opencomposer.agent.protocol.items import FileChange, FileChangeKind


async def test_read_numbers_lines_and_pages(harness, root: Path):
    (root / "a.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    outcome = await harness.call("read_file", {"path": "a.py", "offset": 3, "limit": 2})
    assert outcome.ok
    assert (
        outcome.text == "     3\tline 3\n     4\tline 4\n[... 6 more lines; continue with offset=5]"
    )
    assert outcome.view == "file_read"
    assert outcome.fields == {
        "path": "a.py",
        "total_lines": 10,
        "encoding": "utf-8",
        "range": LineRange(start=3, end=4),
    }


async def test_read_stops_at_the_output_cap_and_says_where_to_continue(harness, root: Path):
    harness.settings.output_cap = 2_000
    (root / "wide.txt").write_text("".join(f"{i:04d} {'x' * 90}\n" for i in range(100)))
    outcome = await harness.call("read_file", {"path": "wide.txt"})
    shown = outcome.text.count("\n")
    assert shown < 25
    assert outcome.text.endswith(f"continue with offset={shown + 1}]")


async def test_read_reports_encodings_and_keeps_long_lines_short(harness, root: Path):
    (root / "w.txt").write_bytes(codecs.BOM_UTF16_LE + "zwölf\r\n".encode("utf-16-le"))
    (root / "long.txt").write_text("y" * 5000)
    outcome = await harness.call("read_file", {"path": "w.txt"})
    assert outcome.text == "[w.txt: utf-16-le with BOM, CRLF]\n     1\tzwölf"
    long = await harness.call("read_file", {"path": "long.txt"})
    assert long.text.endswith("[... 3,000 more characters]")


async def test_read_binary_empty_missing_and_past_the_end(harness, root: Path):
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (root / "empty.txt").write_bytes(b"")
    (root / "two.txt").write_text("a\nb\n")
    binary = await harness.call("read_file", {"path": "img.png"})
    assert (binary.ok, binary.text) == (
        True,
        "img.png is a binary file (72 bytes); it cannot be shown as text.",
    )
    assert (await harness.call("read_file", {"path": "empty.txt"})).text == "empty.txt is empty."
    missing = await harness.call("read_file", {"path": "nope.txt"})
    assert (missing.ok, missing.error.kind) == (False, "not_found")
    past = await harness.call("read_file", {"path": "two.txt", "offset": 5})
    assert past.error.kind == "invalid_arguments" and "past the end" in past.text
    folder = await harness.call("read_file", {"path": "."})
    assert folder.error.kind == "invalid_arguments"


@pytest.mark.slow
async def test_read_a_50_mb_file_by_pages(harness, root: Path):
    line = "0123456789" * 9 + "\n"
    count = 50 * 1024 * 1024 // len(line)
    (root / "big.log").write_text(line * count)
    outcome = await harness.call("read_file", {"path": "big.log", "offset": count - 1, "limit": 5})
    assert outcome.ok
    assert outcome.text.splitlines()[0].strip().startswith(str(count - 1))
    assert outcome.fields["total_lines"] == count


async def test_write_creates_and_refuses_to_clobber(harness, root: Path):
    created = await harness.call(
        "write_file", {"path": "new dir/ünï côdé.py", "content": "x = 1\n"}
    )
    assert created.ok and created.text == "Created new dir/ünï côdé.py (1 lines)."
    assert (root / "new dir/ünï côdé.py").read_bytes() == b"x = 1\n"
    assert created.fields["changes"] == [
        FileChange(
            path="new dir/ünï côdé.py",
            kind=FileChangeKind.add,
            diff="--- /dev/null\n+++ b/new dir/ünï côdé.py\n@@ -0,0 +1 @@\n+x = 1\n",
        )
    ]
    again = await harness.call("write_file", {"path": "new dir/ünï côdé.py", "content": "y\n"})
    assert again.error.kind == "conflict" and "overwrite=true" in again.text


@pytest.mark.parametrize(
    ("original", "expected"),
    [
        (b"a\r\nb\r\n", b"x\r\ny\r\n"),
        (codecs.BOM_UTF8 + b"a\n", codecs.BOM_UTF8 + b"x\ny\n"),
        (
            codecs.BOM_UTF16_LE + "a\r\n".encode("utf-16-le"),
            codecs.BOM_UTF16_LE + "x\r\ny\r\n".encode("utf-16-le"),
        ),
    ],
)
async def test_overwrite_keeps_encoding_bom_and_line_endings(
    harness, root: Path, original, expected
):
    (root / "f.txt").write_bytes(original)
    outcome = await harness.call(
        "write_file", {"path": "f.txt", "content": "x\ny\n", "overwrite": True}
    )
    assert outcome.ok, outcome.text
    assert (root / "f.txt").read_bytes() == expected


async def test_overwrite_with_characters_the_encoding_cannot_hold(harness, root: Path):
    (root / "l1.txt").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1"))
    outcome = await harness.call(
        "write_file", {"path": "l1.txt", "content": "emoji 🙂\n", "overwrite": True}
    )
    assert outcome.error.kind == "invalid_arguments" and "cannot encode '🙂'" in outcome.text
    assert (root / "l1.txt").read_bytes() == "caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1")


async def test_writes_into_git_internals_or_outside_are_denied(harness, root: Path):
    (root / ".git").mkdir()
    inside_git = await harness.call("write_file", {"path": ".git/config", "content": "x"})
    outside = await harness.call("write_file", {"path": "../escape.txt", "content": "x"})
    assert inside_git.error.kind == outside.error.kind == "denied"
    assert not (root.parent / "escape.txt").exists()


async def test_move_and_delete(harness, root: Path):
    (root / "a.txt").write_text("A\n")
    (root / "b.txt").write_text("B\n")
    taken = await harness.call("move_file", {"path": "a.txt", "new_path": "b.txt"})
    assert taken.error.kind == "conflict"
    moved = await harness.call("move_file", {"path": "a.txt", "new_path": "sub/c.txt"})
    assert moved.ok and (root / "sub/c.txt").read_text() == "A\n" and not (root / "a.txt").exists()
    assert moved.fields["changes"][0].kind == FileChangeKind.move
    deleted = await harness.call("delete_file", {"path": "sub/c.txt"})
    assert deleted.ok and not (root / "sub/c.txt").exists()
    gone = await harness.call("delete_file", {"path": "sub/c.txt"})
    assert gone.error.kind == "not_found"
