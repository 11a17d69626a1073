"""apply_patch's planner: every file's new text worked out against the current files, all
before anything is written, so a patch applies whole or not at all.

Hunks are found by their lines, never by line numbers (a unified diff's are only a hint for
choosing among several matches): first exactly, then ignoring trailing whitespace, nothing
looser. Without a hint a hunk must match in one place; Codex `@@ line` anchors, compared
without surrounding whitespace since they only locate, narrow where. A hunk placed at another
line than its header's, or only by ignoring whitespace, is applied and reported: a note for
the model, a HunkAdjustment for clients. Matching sees lines without their endings: lines a
hunk does not add keep theirs, added lines get the file's dominant one, and the final newline
stays as it was unless a `\\ No newline at end of file` marker changes it.
"""

import posixpath
import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from opencomposer.agent.tools.editing.miss import describe_miss
from opencomposer.agent.tools.editing.patch_format import (
    AddFile,
    DeleteFile,
    FileOp,
    Hunk,
    HunkAdjustment,
    PatchError,
    PlannedChange,
    UpdateFile,
)

_ENDINGS = ("\n", "\r\n", "\r")  # "\n" first: it wins ties for the dominant ending
_ENDING_NAMES = {"\n": "LF", "\r\n": "CRLF", "\r": "CR"}


def plan_patch(
    ops: list[FileOp], read: Callable[[str], str | None]
) -> tuple[list[PlannedChange], list[str]]:
    """Every file's new text, plus notes on normalisations applied. `read` gives a file's
    current text with its own line endings, or None when it does not exist. Raises PatchError
    before returning anything if any part of the patch cannot apply."""
    _check_distinct(ops)
    changes: list[PlannedChange] = []
    notes: list[str] = []
    for op in ops:
        current = read(op.path)
        match op:
            case AddFile(path=path, content=content):
                if current is not None:
                    raise _failed(f"Cannot add {path}: it already exists; update it instead.", path)
                changes.append(PlannedChange(path, "add", None, content))
            case DeleteFile(path=path):
                if current is None:
                    raise _failed(f"Cannot delete {path}: it does not exist.", path)
                changes.append(PlannedChange(path, "delete", current, None))
            case UpdateFile(path=path, chunks=hunks, move_to=move_to):
                if current is None:
                    raise _failed(f"Cannot update {path}: it does not exist; add it instead.", path)
                if move_to is not None and _same_path(move_to, path):
                    move_to = None
                if move_to is not None and read(move_to) is not None:
                    raise _failed(
                        f"Cannot move {path} to {move_to}: {move_to} already exists.", path
                    )
                new_text, adjusted = _apply_hunks(path, current, hunks, notes)
                if new_text == current and move_to is None:
                    raise _failed(
                        f"The patch leaves {path} unchanged (its removed and added "
                        "lines are the same). If the file already has the intended "
                        "text, no patch is needed.",
                        path,
                    )
                kind: Literal["move", "update"] = "move" if move_to else "update"
                changes.append(PlannedChange(path, kind, current, new_text, move_to, adjusted))
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
                raise _failed(
                    f"The patch changes {path} more than once; put all of its "
                    "changes in one file section.",
                    path,
                )
            seen.add(key)


def _split(text: str) -> tuple[list[str], list[str]]:
    """Lines and their endings ("" for a last line without one)."""
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines, endings = parts[0::2], [*parts[1::2], ""]
    if lines[-1] == "":
        lines.pop()
        endings.pop()
    return lines, endings


def _apply_hunks(
    path: str, text: str, hunks: list[Hunk], notes: list[str]
) -> tuple[str, tuple[HunkAdjustment, ...]]:
    lines, endings = _split(text)
    newline = max(_ENDINGS, key=endings.count)
    final_newline = not text or endings[-1] != ""
    cursor, placed, adjusted = 0, [], []
    for number, hunk in enumerate(hunks, 1):
        where = _At(path, f"{path}, hunk {number} of {len(hunks)} (patch line {hunk.patch_line})")
        start, hunk, loose = _place(text, lines, hunk, cursor, where)
        adjustment = _adjustment(number, hunk, start, loose)
        if adjustment is not None:
            adjusted.append(adjustment)
            notes += _adjustment_notes(path, adjustment)
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
    return _join(out, newline, final_newline), tuple(adjusted)


def _adjustment(number: int, hunk: Hunk, start: int, loose: bool) -> HunkAdjustment | None:
    """How a placed hunk departs from what it says: another line than its header's (for a
    hunk with old lines: an insertion goes exactly where its header says), or whitespace."""
    replaces = any(op != "+" for op, _ in hunk.lines)
    header = hunk.hint + 1 if hunk.hint is not None and replaces else None
    if not loose and header in (None, start + 1):
        return None
    return HunkAdjustment(number, header, start + 1, ignored_whitespace=loose)


def _adjustment_notes(path: str, adjustment: HunkAdjustment) -> list[str]:
    number, notes = adjustment.hunk, []
    if adjustment.header_line not in (None, adjustment.applied_line):
        notes.append(
            f"{path}: hunk {number} applied at line {adjustment.applied_line}, not at "
            f"line {adjustment.header_line} where its header puts it; check that this "
            "is the place you meant."
        )
    if adjustment.ignored_whitespace:
        notes.append(f"{path}: hunk {number} matched only after ignoring trailing whitespace.")
    return notes


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
    hint = hunk.hint  # a local, so the lambda sees it narrowed to int
    if hint is not None:
        return min(found, key=lambda start: (abs(start - hint), start)), hunk, loose
    shown = ", ".join(str(start + 1) for start in found[:10])
    more = "after its @@ lines " if hunk.anchors else ""
    raise where.fail(
        f"its lines match {more}in {len(found)} places (lines {shown}). Add an "
        "'@@ <line>' naming the enclosing class or function, or more context "
        "lines, to make it unique."
    )


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
    return [
        start
        for start in range(max(first, cursor), len(lines) - size + 1)
        if lines[start] == old[0] and lines[start : start + size] == old
    ]


def _anchor_ends(
    text: str, lines: list[str], anchors: list[str], cursor: int, where: _At
) -> list[int]:
    """For each line after the cursor that matches the first anchor, the line after the rest
    of the anchors (each found as the first match after the one before)."""
    keys = [line.strip() for line in lines]
    ends: list[int] = []
    missing = anchors[0]
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
        raise where.fail(
            f"its @@ line {missing.strip()!r} was not found{after}. "
            + describe_miss(text, missing.strip(), "the @@ line")
        )
    return ends


def _insertion_point(text: str, lines: list[str], hunk: Hunk, cursor: int, where: _At) -> int:
    """Where a hunk with only added lines goes: right after its anchors, at its line hint, or
    (as in Codex) at the end of the file."""
    if hunk.anchors:
        ends = sorted(set(_anchor_ends(text, lines, hunk.anchors, cursor, where)))
        if len(ends) > 1:
            shown = ", ".join(str(end) for end in ends[:10])
            raise where.fail(
                f"its @@ lines match in {len(ends)} places (lines {shown}); add "
                "an outer @@ line or context lines to say which."
            )
        return ends[0]
    if hunk.hint is not None and not hunk.at_end:
        if not cursor <= hunk.hint <= len(lines):
            raise where.fail(
                f"it adds lines after line {hunk.hint}, but the file has "
                f"{len(lines)} lines and the previous hunk ends at line {cursor}."
            )
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
            why = (
                f"before the end of the previous hunk (line {cursor}); hunks must be in file order"
            )
        elif hunk.at_end:
            why = "not at the end of the file, which its end-of-file marker requires"
        else:
            why = "not after its @@ lines"
        return where.fail(f"its lines are at line {start}, {why}.")
    return where.fail(
        "its lines were not found. "
        + describe_miss(text, "\n".join(old), "the hunk", whole_lines=True)
    )
