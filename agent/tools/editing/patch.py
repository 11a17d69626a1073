"""apply_patch's engine: parse a patch (Codex's `*** Begin Patch` envelope, or a unified diff
such as `git diff` prints), then plan every file's new text against the current files, all
before anything is written.

Hunks are found by their lines, never by line numbers (a unified diff's are only a hint for
choosing among several matches): first exactly, then ignoring trailing whitespace, nothing
looser. Without a hint a hunk must match in one place; Codex `@@ line` anchors, compared without
surrounding whitespace since they only locate, narrow where. Matching sees lines without their
endings: lines a hunk does not add keep theirs, added lines get the file's dominant one, and
the final newline stays as it was unless a `\\ No newline at end of file` marker changes it.
"""

import codecs
import posixpath
import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from opencomposer.agent.tools.editing.str_replace import describe_miss

_BEGIN, _END, _END_OF_FILE = "*** Begin Patch", "*** End Patch", "*** End of File"
_ADD, _DELETE, _UPDATE = "*** Add File: ", "*** Delete File: ", "*** Update File: "
_MOVE = "*** Move to: "
_UNIFIED_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_ENDINGS = ("\n", "\r\n", "\r")  # "\n" first: it wins ties for the dominant ending
_ENDING_NAMES = {"\n": "LF", "\r\n": "CRLF", "\r": "CR"}
_GIT_IGNORED = ("index ", "old mode ", "new mode ", "similarity index ", "dissimilarity index ")

PatchLine = tuple[int, str]
"""A line of the patch and its 1-based number there."""


@dataclass(frozen=True)
class Hunk:
    lines: list[tuple[str, str]]
    """(op, text) pairs, op being " " (context), "-" (removed) or "+" (added)."""

    anchors: list[str] = field(default_factory=list)
    """Codex `@@ line` anchors, outermost first: the hunk lies after these lines, in order."""

    hint: int | None = None
    """Unified diffs: the 0-based old line the `@@` header puts the hunk at."""

    at_end: bool = False
    """The hunk must end where the file ends (`*** End of File`, or a no-newline marker)."""

    final_newline: bool | None = None
    """Whether the new file ends with a line break, when a no-newline marker says."""

    patch_line: int = 0


@dataclass(frozen=True)
class AddFile:
    path: str
    content: str


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class UpdateFile:
    path: str
    chunks: list[Hunk]
    move_to: str | None = None


FileOp = AddFile | DeleteFile | UpdateFile


@dataclass(frozen=True)
class PlannedChange:
    path: str
    kind: Literal["add", "update", "delete", "move"]
    """"move" when an update has a new path (its content may change too)."""

    old_text: str | None
    """The file's current text; None for an add."""

    new_text: str | None
    """None for a delete."""

    move_to: str | None = None


class PatchError(Exception):
    """A patch that cannot be parsed or applied; `message` is complete text for the model."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        """The file the error is about, when it is about one."""


# ---------------------------------------------------------------------- parsing


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
    body, i, ops = lines[1:-1], 0, []
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
                f"{_UPDATE!r} or {_END!r}; lines of an added file start with '+'.")
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


def _parse_codex_hunk(
    body: list[PatchLine], i: int, path: str, first: bool
) -> tuple[Hunk, int]:
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
        raise PatchError(f"Patch line {start}: expected '@@' to start the next hunk of {path}, "
                         f"found {body[i][1]!r}.", path)
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
                "lines start with ' ' (context), '-' (removed) or '+' (added).", path)
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
                f"{_BEGIN!r} ... {_END!r} or a unified diff ('--- a/x', '+++ b/x', '@@' hunks).")
        ops.append(op)
    if not ops:
        raise PatchError("The patch has no file changes.")
    return ops


def _is_file_pair(lines: list[PatchLine], i: int) -> bool:
    return (lines[i][1].startswith("--- ") and i + 1 < len(lines)
            and lines[i + 1][1].startswith("+++ "))


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
            raise PatchError(f"Patch line {at}: copies are not supported; add the new file "
                             "with its full content instead.", new)
        elif header.startswith(("Binary files ", "GIT binary patch")):
            raise PatchError(f"Patch line {at}: binary patches are not supported.", new)
        elif not header.startswith(_GIT_IGNORED):
            raise PatchError(f"Patch line {at}: unexpected line {header!r} in the header of "
                             f"the diff of {old}.", old)
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
        raise PatchError(f"Patch line {number}: malformed hunk header {header!r}; expected "
                         "'@@ -start,count +start,count @@'.", path)
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
    return Hunk(hunk_lines, hint=_hint(numbers), at_end=marked, final_newline=final_newline,
                patch_line=number), end


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
    if old is None and new is None:
        raise PatchError(f"Patch line {number}: both names are /dev/null.")
    if old is None:
        if any(op != "+" for hunk in hunks for op, _ in hunk.lines):
            raise PatchError(f"Patch line {number}: the diff creates {new}, so its hunk may "
                             "only add lines.", new)
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
                "a file, add 'rename from'/'rename to' lines (or use '*** Move to:').", old)
        move_to = new
    if not hunks and move_to is None:
        raise PatchError(f"Patch line {number}: the diff of {old} has no hunks (mode changes "
                         "are not supported).", old)
    return UpdateFile(old, hunks, move_to)


# ---------------------------------------------------------------------- planning


def plan_patch(
    ops: list[FileOp], read: Callable[[str], str | None]
) -> tuple[list[PlannedChange], list[str]]:
    """Every file's new text, plus notes on normalisations applied. `read` gives a file's
    current text with its own line endings, or None when it does not exist. Raises PatchError
    before returning anything if any part of the patch cannot apply."""
    _check_distinct(ops)
    changes, notes = [], []
    for op in ops:
        current = read(op.path)
        match op:
            case AddFile(path=path, content=content):
                if current is not None:
                    raise _failed(f"Cannot add {path}: it already exists; update it instead.",
                                  path)
                changes.append(PlannedChange(path, "add", None, content))
            case DeleteFile(path=path):
                if current is None:
                    raise _failed(f"Cannot delete {path}: it does not exist.", path)
                changes.append(PlannedChange(path, "delete", current, None))
            case UpdateFile(path=path, chunks=hunks, move_to=move_to):
                if current is None:
                    raise _failed(f"Cannot update {path}: it does not exist; add it instead.",
                                  path)
                if move_to is not None and _same_path(move_to, path):
                    move_to = None
                if move_to is not None and read(move_to) is not None:
                    raise _failed(f"Cannot move {path} to {move_to}: {move_to} already exists.",
                                  path)
                new_text = _apply_hunks(path, current, hunks, notes)
                if new_text == current and move_to is None:
                    raise _failed(f"The patch leaves {path} unchanged (its removed and added "
                                  "lines are the same). If the file already has the intended "
                                  "text, no patch is needed.", path)
                kind = "move" if move_to else "update"
                changes.append(PlannedChange(path, kind, current, new_text, move_to))
    return changes, notes


def _failed(message: str, path: str) -> PatchError:
    return PatchError(message + ("\n" if "\n" in message else " ") + "No file was changed.", path)


@dataclass(frozen=True)
class _At:
    """A hunk being placed, for error messages."""

    path: str
    label: str

    def fail(self, message: str) -> PatchError:
        return _failed(f"{self.label}: {message}", self.path)


def _same_path(a: str, b: str) -> bool:
    return posixpath.normpath(a) == posixpath.normpath(b)


def _check_distinct(ops: list[FileOp]) -> None:
    """One op per path (move targets included): otherwise the result would depend on order."""
    seen: set[str] = set()
    for op in ops:
        paths = [op.path]
        if isinstance(op, UpdateFile) and op.move_to and not _same_path(op.move_to, op.path):
            paths.append(op.move_to)
        for path in paths:
            key = posixpath.normpath(path)
            if key in seen:
                raise _failed(f"The patch changes {path} more than once; put all of its "
                              "changes in one file section.", path)
            seen.add(key)


def _split(text: str) -> tuple[list[str], list[str]]:
    """Lines and their endings ("" for a last line without one)."""
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines, endings = parts[0::2], [*parts[1::2], ""]
    if lines[-1] == "":
        lines.pop()
        endings.pop()
    return lines, endings


def _apply_hunks(path: str, text: str, hunks: list[Hunk], notes: list[str]) -> str:
    lines, endings = _split(text)
    newline = max(_ENDINGS, key=endings.count)
    final_newline = not text or endings[-1] != ""
    cursor, placed = 0, []
    for number, hunk in enumerate(hunks, 1):
        where = _At(path, f"{path}, hunk {number} of {len(hunks)} (patch line {hunk.patch_line})")
        start, hunk, loose = _place(text, lines, hunk, cursor, where)
        if loose:
            notes.append(f"{path}: hunk {number} matched only after ignoring trailing whitespace.")
        removed = sum(op != "+" for op, _ in hunk.lines)
        if removed or hunk.anchors or hunk.hint is not None:
            cursor = start + removed  # Codex leaves the cursor alone for a hunk appended at the end
        placed.append((start, hunk))
    out: list[tuple[str, str]] = []
    position = 0
    for start, hunk in sorted(placed, key=lambda item: item[0]):
        out += zip(lines[position:start], endings[position:start], strict=True)
        position = start
        for op, line in hunk.lines:
            if op == "+":
                out.append((line, newline))
            else:
                if op == " ":
                    out.append((lines[position], endings[position]))
                position += 1
        if hunk.final_newline is not None and position == len(lines):
            final_newline = hunk.final_newline
    out += zip(lines[position:], endings[position:], strict=True)
    if newline != "\n" and any(op == "+" for hunk in hunks for op, _ in hunk.lines):
        notes.append(f"{path}: added lines use the file's {_ENDING_NAMES[newline]} line endings.")
    return _join(out, newline, final_newline)


def _join(out: list[tuple[str, str]], newline: str, final_newline: bool) -> str:
    """Lines back into text: every line but the last ends with a line break; the last with one
    exactly when the file should end with one."""
    if not out:
        return ""
    last_line, last_ending = out[-1]
    body = "".join(line + (ending or newline) for line, ending in out[:-1])
    return body + last_line + ((last_ending or newline) if final_newline else "")


def _place(
    text: str, lines: list[str], hunk: Hunk, cursor: int, where: _At
) -> tuple[int, Hunk, bool]:
    """(start line, hunk as applied, whether it took ignoring trailing whitespace)."""
    old = [line for op, line in hunk.lines if op != "+"]
    if not old:
        return _insertion_point(text, lines, hunk, cursor, where), hunk, False
    for loose in (False, True):
        found = _starts(text, lines, old, hunk, cursor, loose, where)
        if found:
            break
    else:
        # Codex drops blank context lines that end a hunk when they do not match: models put a
        # blank line between hunks, and the phantom line after a final newline is not there.
        if len(old) > 1 and hunk.lines[-1] == (" ", ""):
            try:
                return _place(text, lines, replace(hunk, lines=hunk.lines[:-1]), cursor, where)
            except PatchError:
                pass
        raise _missing(text, lines, old, hunk, cursor, where)
    if len(found) == 1:
        return found[0], hunk, loose
    if hunk.hint is not None:
        return min(found, key=lambda start: (abs(start - hunk.hint), start)), hunk, loose
    shown = ", ".join(str(start + 1) for start in found[:10])
    more = "after its @@ lines " if hunk.anchors else ""
    raise where.fail(f"its lines match {more}in {len(found)} places (lines {shown}). Add an "
                     "'@@ <line>' naming the enclosing class or function, or more context "
                     "lines, to make it unique.")


def _starts(
    text: str, lines: list[str], old: list[str], hunk: Hunk, cursor: int, loose: bool, where: _At
) -> list[int]:
    """Where the hunk's old lines could start: every match after the cursor, or with anchors,
    the first match after each way of finding the anchors."""
    hits = _matches(lines, old, cursor, loose, hunk.at_end)
    if not hunk.anchors:
        return hits
    found = set()
    for after in _anchor_ends(text, lines, hunk.anchors, cursor, where):
        i = bisect_left(hits, after)
        if i < len(hits):
            found.add(hits[i])
    return sorted(found)


def _matches(lines: list[str], old: list[str], cursor: int, loose: bool, at_end: bool) -> list[int]:
    if loose:
        lines, old = [line.rstrip() for line in lines], [line.rstrip() for line in old]
    size = len(old)
    first = len(lines) - size if at_end else cursor
    return [start for start in range(max(first, cursor), len(lines) - size + 1)
            if lines[start] == old[0] and lines[start : start + size] == old]


def _anchor_ends(
    text: str, lines: list[str], anchors: list[str], cursor: int, where: _At
) -> list[int]:
    """For each line after the cursor that matches the first anchor, the line after the rest
    of the anchors (each found as the first match after the one before)."""
    keys = [line.strip() for line in lines]
    ends, missing = [], anchors[0]
    for first in (i for i in range(cursor, len(lines)) if keys[i] == anchors[0].strip()):
        end = first + 1
        for anchor in anchors[1:]:
            end = next((i + 1 for i in range(end, len(lines)) if keys[i] == anchor.strip()), -1)
            if end < 0:
                missing = anchor if not ends else missing
                break
        else:
            ends.append(end)
    if not ends:
        after = f" after line {cursor}" if cursor else ""
        raise where.fail(f"its @@ line {missing.strip()!r} was not found{after}. "
                         + describe_miss(text, missing.strip(), "the @@ line"))
    return ends


def _insertion_point(text: str, lines: list[str], hunk: Hunk, cursor: int, where: _At) -> int:
    """Where a hunk with only added lines goes: right after its anchors, at its line hint, or
    (as in Codex) at the end of the file."""
    if hunk.anchors:
        ends = sorted(set(_anchor_ends(text, lines, hunk.anchors, cursor, where)))
        if len(ends) > 1:
            shown = ", ".join(str(end) for end in ends[:10])
            raise where.fail(f"its @@ lines match in {len(ends)} places (lines {shown}); add "
                             "an outer @@ line or context lines to say which.")
        return ends[0]
    if hunk.hint is not None and not hunk.at_end:
        if not cursor <= hunk.hint <= len(lines):
            raise where.fail(f"it adds lines after line {hunk.hint}, but the file has "
                             f"{len(lines)} lines and the previous hunk ends at line {cursor}.")
        return hunk.hint
    return len(lines)


def _missing(
    text: str, lines: list[str], old: list[str], hunk: Hunk, cursor: int, where: _At
) -> PatchError:
    """Why the hunk's lines are not where the patch says, or the closest real lines."""
    elsewhere = _matches(lines, old, 0, True, False)
    if elsewhere:
        start = elsewhere[0] + 1
        if elsewhere[0] < cursor:
            why = (f"before the end of the previous hunk (line {cursor}); hunks must be in file "
                   "order")
        elif hunk.at_end:
            why = "not at the end of the file, which its end-of-file marker requires"
        else:
            why = "not after its @@ lines"
        return where.fail(f"its lines are at line {start}, {why}.")
    return where.fail("its lines were not found. "
                      + describe_miss(text, "\n".join(old), "the hunk", whole_lines=True))
