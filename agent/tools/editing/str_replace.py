"""Exact string replacement behind edit_file: a list of edits applied in order, all or nothing.

Matching is exact. The one normalisation is line endings: models write "\\n", so in a CRLF or
CR file an old_string without "\\r" is matched (and its new_string written) with the file's
endings, and in a file that mixes endings, with each ending it uses. When nothing matches, the
error explains why with `miss.describe_miss`.
"""

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from opencomposer.agent.tools.editing.miss import describe_miss

Reason = Literal["empty_old_string", "no_match", "multiple_matches", "no_change", "overlap"]

_ENDING_NAMES = {"\n": "LF", "\r\n": "CRLF", "\r": "CR"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_MAX_LISTED_MATCHES = 10


@dataclass(frozen=True)
class Edit:
    old_string: str
    new_string: str
    replace_all: bool = False


@dataclass(frozen=True)
class EditOutcome:
    text: str
    """The whole new text."""

    replacements: int
    """Occurrences replaced, over all edits."""

    changed_lines: list[tuple[int, int]]
    """1-based inclusive line ranges in the new text, one per replaced occurrence, in the order
    the replacements were made (edit by edit, each edit's occurrences top to bottom)."""

    notes: list[str]
    """Deterministic normalisations that were applied, said plainly."""


class EditError(Exception):
    """An edit that cannot be applied; `message` is complete text for the model."""

    def __init__(self, reason: Reason, edit_index: int, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.edit_index = edit_index
        """0-based index of the failing edit."""
        self.message = message


def apply_edits(text: str, edits: Sequence[Edit], newline: str = "\n") -> EditOutcome:
    """Apply `edits` in order, each to the result of the previous one. `text` keeps the file's
    own line endings and `newline` is its dominant one."""
    regions: list[tuple[int, int, int]] = []  # (start, end, edit index) of each replacement
    notes: list[str] = []
    for index, edit in enumerate(edits):
        spans, new, note = _locate(text, edit, newline, _failer(index, len(edits)), regions)
        text, regions = _replace(text, spans, new, regions, index)
        if note and note not in notes:
            notes.append(note)
    lines = _LineIndex(text)
    changed = [(lines.at(start), lines.at(max(start, end - 1))) for start, end, _ in regions]
    return EditOutcome(text=text, replacements=len(regions), changed_lines=changed, notes=notes)


def _failer(index: int, count: int) -> Callable[[Reason, str], EditError]:
    """Builds errors that say which edit failed, that none was applied, and (after earlier
    edits) which text their line numbers count in."""
    prefix = f"Edit {index + 1} of {count}: " if count > 1 else ""
    suffix = " No edit was applied." if count > 1 else ""
    earlier = "edit 1" if index == 1 else f"edits 1-{index}"
    numbered = f" Line numbers are as they would be after {earlier}." if index else ""

    def fail(reason: Reason, message: str) -> EditError:
        lines = numbered if reason in ("no_match", "multiple_matches", "overlap") else ""
        after = (lines + suffix).lstrip()
        if after and "\n" in message:
            message += "\n" + after
        elif after:
            message += " " + after
        return EditError(reason, index, prefix + message)

    return fail


def _locate(
    text: str,
    edit: Edit,
    newline: str,
    fail: Callable[[Reason, str], EditError],
    regions: list[tuple[int, int, int]],
) -> tuple[list[tuple[int, int]], str, str | None]:
    """The spans `edit` replaces, the text it puts there, and a note on any conversion."""
    if not edit.old_string:
        raise fail(
            "empty_old_string",
            "old_string is empty. To create a file or replace all of its content, use write_file.",
        )
    unchanged = (
        "old_string and new_string are identical, so the edit would change nothing. If "
        "the file already has the intended text, no edit is needed."
    )
    if edit.old_string == edit.new_string:
        raise fail("no_change", unchanged)
    for ending in _endings_to_try(text, edit.old_string, newline):
        old, new = _convert(edit.old_string, ending), _convert(edit.new_string, ending)
        step = len(old) if edit.replace_all else 1
        starts = _occurrences(text, old, step)
        if starts:
            break
    else:
        raise fail(
            "no_match",
            "old_string was not found in the file. "
            + describe_miss(text, edit.old_string, "old_string"),
        )
    if old == new:  # they differed only in line endings, which the file's endings replaced
        raise fail("no_change", unchanged)
    if len(starts) > 1 and not edit.replace_all:
        raise fail("multiple_matches", _multiple_message(text, starts))
    spans = [(start, start + len(old)) for start in starts]
    overlapped = _first_overlap(spans, regions)
    if overlapped is not None:
        start, writer = overlapped
        raise fail(
            "overlap",
            f"old_string matches text that edit {writer + 1} of this call "
            f"wrote (line {_LineIndex(text).at(start)}). Each edit must target text the "
            "earlier edits left alone; merge the two into one edit.",
        )
    note = None
    if (old, new) != (edit.old_string, edit.new_string):
        name = _ENDING_NAMES[ending]
        note = (
            f"matched using the file's {name} line endings"
            if old != edit.old_string
            else f"wrote new_string's line breaks as the file's {name} line endings"
        )
    return spans, new, note


def _endings_to_try(text: str, old: str, newline: str) -> list[str]:
    """The dominant ending first, then (when old_string spans lines) the others the file uses."""
    if "\r" in old:
        return ["\n"]  # the model spelled its line endings out: take them as written
    if "\n" not in old:
        return [newline]
    crlf = text.count("\r\n")
    used = {"\n": text.count("\n") > crlf, "\r\n": crlf > 0, "\r": text.count("\r") > crlf}
    return [newline, *(ending for ending, present in used.items() if present and ending != newline)]


def _convert(text: str, ending: str) -> str:
    return text if "\r" in text else text.replace("\n", ending)


def _occurrences(text: str, old: str, step: int) -> list[int]:
    """Start offsets of `old`; a step of 1 counts overlapping occurrences too, which is what
    uniqueness must mean (an edit of "aa" in "aaa" is ambiguous)."""
    found = []
    start = text.find(old)
    while start != -1:
        found.append(start)
        start = text.find(old, start + step)
    return found


def _multiple_message(text: str, starts: list[int]) -> str:
    lines = _LineIndex(text)
    numbers = [str(lines.at(start)) for start in starts[:_MAX_LISTED_MATCHES]]
    listed = ", ".join(numbers)
    if len(starts) > _MAX_LISTED_MATCHES:
        listed += f" and {len(starts) - _MAX_LISTED_MATCHES} more"
    return (
        f"old_string occurs {len(starts)} times (starting at lines {listed}). Add surrounding "
        "lines to old_string to make it unique, or set replace_all to replace every one."
    )


def _first_overlap(
    spans: list[tuple[int, int]], regions: list[tuple[int, int, int]]
) -> tuple[int, int] | None:
    """(span start, writing edit) for the first span that touches an earlier edit's text.
    Spans are sorted and disjoint, so only the first span ending after a region can meet it."""
    ends = [end for _, end in spans]
    hits = []
    for start, end, writer in regions:
        i = bisect_right(ends, start)
        if i < len(spans) and spans[i][0] < end:
            hits.append((spans[i][0], writer))
    return min(hits) if hits else None


def _replace(
    text: str,
    spans: list[tuple[int, int]],
    new: str,
    regions: list[tuple[int, int, int]],
    index: int,
) -> tuple[str, list[tuple[int, int, int]]]:
    """The text with every span replaced by `new`, and all replacement regions (earlier ones
    shifted, then this edit's) in the new text's offsets."""
    parts, previous = [], 0
    for start, end in spans:
        parts += [text[previous:start], new]
        previous = end
    parts.append(text[previous:])
    growth = len(new) - (spans[0][1] - spans[0][0])
    ends = [end for _, end in spans]
    moved = []
    for start, end, writer in regions:
        shift = growth * bisect_right(ends, start)
        moved.append((start + shift, end + shift, writer))
    added = [
        (start + growth * i, start + growth * i + len(new), index)
        for i, (start, _) in enumerate(spans)
    ]
    return "".join(parts), moved + added


class _LineIndex:
    """1-based line numbers of offsets, for any mix of line endings."""

    def __init__(self, text: str) -> None:
        self._breaks = [match.end() for match in _LINE_BREAK.finditer(text)]

    def at(self, offset: int) -> int:
        return bisect_right(self._breaks, offset) + 1
