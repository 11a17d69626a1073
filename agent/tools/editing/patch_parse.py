"""apply_patch's parser: Codex's `*** Begin Patch` envelope, or a unified diff such as
`git diff` prints, read into FileOps. It is strict: anything it does not understand is a
PatchError naming the patch line, never skipped.
"""

import codecs
import re

from opencomposer.agent.tools.editing.patch_format import (
    AddFile,
    DeleteFile,
    FileOp,
    Hunk,
    PatchError,
    UpdateFile,
)

_BEGIN, _END, _END_OF_FILE = "*** Begin Patch", "*** End Patch", "*** End of File"
_ADD, _DELETE, _UPDATE = "*** Add File: ", "*** Delete File: ", "*** Update File: "
_MOVE = "*** Move to: "
_UNIFIED_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_GIT_IGNORED = ("index ", "old mode ", "new mode ", "similarity index ", "dissimilarity index ")

PatchLine = tuple[int, str]
"""A line of the patch and its 1-based number there."""


def parse_patch(text: str) -> list[FileOp]:
    """The file operations of a Codex patch or a unified diff. Anything the parser does not
    understand is a PatchError naming the patch line, never skipped."""
    lines = _unwrap(text)
    if not lines:
        raise PatchError("The patch is empty.")
    if lines[0][1].strip() == _BEGIN:
        return _parse_codex(lines)
    return _parse_unified(lines)


def _unwrap(text: str) -> list[PatchLine]:
    """The patch's lines without surrounding blank lines or a ``` fence around it all."""
    lines = _trim(list(enumerate(text.replace("\r\n", "\n").split("\n"), 1)))
    if len(lines) > 1 and lines[0][1].lstrip().startswith("```") and lines[-1][1].strip() == "```":
        lines = _trim(lines[1:-1])
    return lines


def _trim(lines: list[PatchLine]) -> list[PatchLine]:
    while lines and not lines[0][1].strip():
        lines = lines[1:]
    while lines and not lines[-1][1].strip():
        lines = lines[:-1]
    return lines


def _parse_codex(lines: list[PatchLine]) -> list[FileOp]:
    number, last = lines[-1]
    if len(lines) < 2 or last.strip() != _END:
        raise PatchError(f"Patch line {number}: the patch must end with {_END!r}.")
    body, i = lines[1:-1], 0
    ops: list[FileOp] = []
    while i < len(body):
        number, line = body[i]
        header = line.strip()
        if header.startswith(_ADD):
            path = _header_path(header, _ADD, number)
            added, i = [], i + 1
            while i < len(body) and body[i][1].startswith("+"):
                added.append(body[i][1][1:] + "\n")
                i += 1
            ops.append(AddFile(path, "".join(added)))
        elif header.startswith(_DELETE):
            ops.append(DeleteFile(_header_path(header, _DELETE, number)))
            i += 1
        elif header.startswith(_UPDATE):
            update, i = _parse_codex_update(body, i)
            ops.append(update)
        else:
            raise PatchError(
                f"Patch line {number}: unexpected line {line!r}. Expected {_ADD!r}, {_DELETE!r}, "
                f"{_UPDATE!r} or {_END!r}; lines of an added file start with '+'."
            )
    if not ops:
        raise PatchError("The patch has no file operations.")
    return ops


def _header_path(header: str, marker: str, number: int) -> str:
    path = header[len(marker) :].strip()
    if not path:
        raise PatchError(f"Patch line {number}: {marker.strip()!r} needs a path.")
    return path


def _parse_codex_update(body: list[PatchLine], i: int) -> tuple[UpdateFile, int]:
    number, line = body[i]
    path = _header_path(line.strip(), _UPDATE, number)
    i += 1
    move_to = None
    if i < len(body) and body[i][1].strip().startswith(_MOVE):
        move_to = _header_path(body[i][1].strip(), _MOVE, body[i][0])
        i += 1
    hunks: list[Hunk] = []
    while i < len(body) and not body[i][1].startswith("***"):
        hunk, i = _parse_codex_hunk(body, i, path, first=not hunks)
        hunks.append(hunk)
    if not hunks and move_to is None:
        raise PatchError(f"Patch line {number}: the update of {path} has no hunks.", path)
    return UpdateFile(path, hunks, move_to), i


def _parse_codex_hunk(body: list[PatchLine], i: int, path: str, first: bool) -> tuple[Hunk, int]:
    """One hunk: `@@` lines (each an anchor, or a unified `@@ -l,s +l,s @@` header, which
    gives a line hint), then its lines; the first hunk of a file may leave out `@@`."""
    start, opening, anchors, hint = body[i][0], i, [], None
    while i < len(body) and (body[i][1] == "@@" or body[i][1].startswith("@@ ")):
        header = body[i][1]
        numbers = _UNIFIED_HUNK.match(header)
        if numbers:
            hint = _hint(numbers)
        elif header[3:].strip():
            anchors.append(header[3:])
        i += 1
    if not first and i == opening:
        raise PatchError(
            f"Patch line {start}: expected '@@' to start the next hunk of {path}, "
            f"found {body[i][1]!r}.",
            path,
        )
    lines: list[tuple[str, str]] = []
    at_end = False
    while i < len(body):
        number, line = body[i]
        if line.strip() == _END_OF_FILE:
            at_end, i = True, i + 1
            break
        if line.startswith(("@@", "***")):
            break
        if line[:1] not in ("", " ", "+", "-"):
            raise PatchError(
                f"Patch line {number}: unexpected line {line!r} in the update of {path}. Hunk "
                "lines start with ' ' (context), '-' (removed) or '+' (added).",
                path,
            )
        lines.append((line[:1] or " ", line[1:]))
        i += 1
    if not lines:
        raise PatchError(f"Patch line {start}: a hunk of {path} has no lines.", path)
    return Hunk(lines, anchors, hint, at_end, patch_line=start), i


def _hint(numbers: re.Match[str]) -> int:
    """The 0-based old line a unified header points at; with no old lines, the insertion
    point (`-5,0` inserts after line 5)."""
    start = int(numbers[1])
    return max(0, start - 1) if numbers[2] != "0" else start


def _parse_unified(lines: list[PatchLine]) -> list[FileOp]:
    ops, i = [], 0
    while i < len(lines):
        number, line = lines[i]
        if line.startswith("diff --git "):
            op, i = _parse_git_file(lines, i)
        elif _is_file_pair(lines, i):
            old, new, hunks, i = _parse_file_diff(lines, i)
            op = _file_op(number, old, new, hunks)
        elif not line.strip() or line.startswith("diff "):
            i += 1
            continue
        else:
            raise PatchError(
                f"Patch line {number}: {line!r} is not part of a patch. Write either "
                f"{_BEGIN!r} ... {_END!r} or a unified diff ('--- a/x', '+++ b/x', '@@' hunks)."
            )
        ops.append(op)
    if not ops:
        raise PatchError("The patch has no file changes.")
    return ops


def _is_file_pair(lines: list[PatchLine], i: int) -> bool:
    return (
        lines[i][1].startswith("--- ") and i + 1 < len(lines) and lines[i + 1][1].startswith("+++ ")
    )


def _parse_git_file(lines: list[PatchLine], i: int) -> tuple[FileOp, int]:
    number, line = lines[i]
    old, new = _strip_prefixes(*_git_paths(line[len("diff --git ") :], number))
    added = deleted = renamed = False
    i += 1
    while i < len(lines) and lines[i][1].strip() and not lines[i][1].startswith(("--- ", "diff ")):
        at, header = lines[i]
        if header.startswith("new file mode "):
            added = True
        elif header.startswith("deleted file mode "):
            deleted = True
        elif header.startswith("rename from "):
            old, renamed = _unquote(header[len("rename from ") :], at), True
        elif header.startswith("rename to "):
            new, renamed = _unquote(header[len("rename to ") :], at), True
        elif header.startswith(("copy from ", "copy to ")):
            raise PatchError(
                f"Patch line {at}: copies are not supported; add the new file "
                "with its full content instead.",
                new,
            )
        elif header.startswith(("Binary files ", "GIT binary patch")):
            raise PatchError(f"Patch line {at}: binary patches are not supported.", new)
        elif not header.startswith(_GIT_IGNORED):
            raise PatchError(
                f"Patch line {at}: unexpected line {header!r} in the header of the diff of {old}.",
                old,
            )
        i += 1
    hunks: list[Hunk] = []
    if i < len(lines) and lines[i][1].startswith("--- "):
        old, new, hunks, i = _parse_file_diff(lines, i)
    return _file_op(number, None if added else old, None if deleted else new, hunks, renamed), i


def _git_paths(rest: str, number: int) -> tuple[str, str]:
    """The two paths of `diff --git a/x b/x`; unquoted paths may hold spaces, so when the split
    is unclear the one giving equal names wins."""
    quoted = re.fullmatch(rf"({_QUOTED}|\S+) ({_QUOTED}|\S+)", rest)
    if quoted:
        return _unquote(quoted[1], number), _unquote(quoted[2], number)
    splits = [match.start() for match in re.finditer(" b/", rest)]
    if not splits:
        raise PatchError(f"Patch line {number}: cannot read the paths in 'diff --git {rest}'.")
    split = next((s for s in splits if rest[2:s] == rest[s + 3 :]), splits[0])
    return rest[:split], rest[split + 1 :]


def _unquote(path: str, number: int) -> str:
    """Git's C-style quoting ("a/caf\\303\\251.txt") undone."""
    path = path.rstrip()
    if not (len(path) > 1 and path.startswith('"') and path.endswith('"')):
        return path
    try:
        return codecs.escape_decode(path[1:-1].encode())[0].decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise PatchError(f"Patch line {number}: cannot read the quoted path {path}.") from exc


def _strip_prefixes(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """Drop git's a/ and b/ prefixes, when both names (other than /dev/null) carry them."""
    if (old or "a/").startswith("a/") and (new or "b/").startswith("b/"):
        return old and old[2:], new and new[2:]
    return old, new


def _parse_file_diff(
    lines: list[PatchLine], i: int
) -> tuple[str | None, str | None, list[Hunk], int]:
    """`--- old`, `+++ new` and the hunks after them; /dev/null reads as None."""
    names = []
    for at, line in lines[i : i + 2]:
        name = _unquote(line[4:].split("\t")[0], at)
        if not name:
            raise PatchError(f"Patch line {at}: {line!r} names no file.")
        names.append(None if name == "/dev/null" else name)
    old, new = _strip_prefixes(*names)
    i += 2
    hunks = []
    while i < len(lines) and lines[i][1].startswith("@@"):
        hunk, i = _parse_unified_hunk(lines, i, new or old or "")
        hunks.append(hunk)
    return old, new, hunks, i


def _parse_unified_hunk(lines: list[PatchLine], i: int, path: str) -> tuple[Hunk, int]:
    """A `@@ -l,s +l,s @@` hunk. Its counts decide where it ends when they fit the lines (so a
    removed "-- x" line is not taken for a file header); models often miscount, so when they
    do not fit, the hunk runs to the first line that cannot belong to it."""
    number, header = lines[i]
    numbers = _UNIFIED_HUNK.match(header)
    if not numbers:
        raise PatchError(
            f"Patch line {number}: malformed hunk header {header!r}; expected "
            "'@@ -start,count +start,count @@'.",
            path,
        )
    old_count, new_count = (int(n) if n is not None else 1 for n in numbers.group(2, 3))
    end = _counted_end(lines, i + 1, old_count, new_count)
    if end is None:
        end = _shaped_end(lines, i + 1)
    hunk_lines: list[tuple[str, str]] = []
    old_marked = new_marked = False
    for at, line in lines[i + 1 : end]:
        if not line.startswith("\\"):
            hunk_lines.append((line[:1] or " ", line[1:]))
        elif not hunk_lines:
            raise PatchError(f"Patch line {at}: {line!r} must follow a hunk line.", path)
        else:
            old_marked |= hunk_lines[-1][0] != "+"
            new_marked |= hunk_lines[-1][0] != "-"
    if not hunk_lines:
        raise PatchError(f"Patch line {number}: the hunk has no lines.", path)
    marked = old_marked or new_marked
    final_newline = not new_marked if marked else None
    return Hunk(
        hunk_lines,
        hint=_hint(numbers),
        at_end=marked,
        final_newline=final_newline,
        patch_line=number,
    ), end


def _counted_end(lines: list[PatchLine], i: int, old: int, new: int) -> int | None:
    while old > 0 or new > 0:
        if i >= len(lines):
            return None
        op = lines[i][1][:1]
        if op in ("", " ", "-"):
            old -= 1
        if op in ("", " ", "+"):
            new -= 1
        if op not in ("", " ", "-", "+", "\\") or old < 0 or new < 0:
            return None
        i += 1
    if i < len(lines) and lines[i][1].startswith("\\"):
        i += 1
    continues = i < len(lines) and lines[i][1][:1] in (" ", "-", "+", "\\")
    return None if continues and not _is_file_pair(lines, i) else i


def _shaped_end(lines: list[PatchLine], i: int) -> int:
    start = i
    while i < len(lines) and lines[i][1][:1] in ("", " ", "-", "+", "\\"):
        if _is_file_pair(lines, i):
            break
        i += 1
    while i > start and lines[i - 1][1] == "":
        i -= 1  # blank lines after a hunk separate it from what follows
    return i


def _file_op(
    number: int, old: str | None, new: str | None, hunks: list[Hunk], renamed: bool = False
) -> FileOp:
    if old is None:
        if new is None:
            raise PatchError(f"Patch line {number}: both names are /dev/null.")
        if any(op != "+" for hunk in hunks for op, _ in hunk.lines):
            raise PatchError(
                f"Patch line {number}: the diff creates {new}, so its hunk may only add lines.", new
            )
        texts = [text for hunk in hunks for _, text in hunk.lines]
        content = "".join(text + "\n" for text in texts)
        if hunks and hunks[-1].final_newline is False:
            content = content[:-1]
        return AddFile(new, content)
    if new is None:
        return DeleteFile(old)
    move_to = None
    if old != new:
        if not renamed:
            raise PatchError(
                f"Patch line {number}: the old and new names differ ({old}, {new}). To rename "
                "a file, add 'rename from'/'rename to' lines (or use '*** Move to:').",
                old,
            )
        move_to = new
    if not hunks and move_to is None:
        raise PatchError(
            f"Patch line {number}: the diff of {old} has no hunks (mode changes "
            "are not supported).",
            old,
        )
    return UpdateFile(old, hunks, move_to)
