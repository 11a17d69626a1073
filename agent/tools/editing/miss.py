"""Why text the model quoted (edit_file's old_string, an apply_patch hunk or `@@` line) is not
in the file. `describe_miss` finds the closest real text and names the difference (indentation,
trailing whitespace, quotes, ...) so the next try can copy the right lines; what it finds is
only shown, never applied.
"""

import difflib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

_ENDING_NAMES = {"\n": "LF", "\r\n": "CRLF", "\r": "CR"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_MAX_SHOWN_LINES = 12
_MAX_SHOWN_CHARS = 240
# Below this difflib ratio a region shares too little with the wanted text to be worth showing.
_MIN_SIMILARITY = 0.5
_MAX_SCORED_WINDOWS = 20
# Fuzzy line lookup costs a difflib comparison per distinct file line; a few lines suffice to
# find the region.
_MAX_FUZZY_LINES = 3
_LINE_NUMBER_PREFIX = re.compile(r"^[ \t]*\d+(?:\| ?|→|\t)", re.MULTILINE)
_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u2026": "...",
    }
)


def describe_miss(text: str, wanted: str, noun: str, whole_lines: bool = False) -> str:
    """Why `wanted` (what the model called `noun`) is not in `text`, and the real lines closest
    to it, numbered as `  123| text`. With `whole_lines` (patch hunks), `wanted` is a run of
    complete lines rather than any substring."""
    if not text:
        return "The file is empty."
    miss = _Miss(text, _lf(text), _lf(wanted), wanted, noun, whole_lines)
    checks = (
        _line_endings,
        _line_numbers,
        _escapes,
        _typography,
        _trailing_whitespace,
        _indentation,
        _outer_whitespace,
    )
    for check in checks:
        found = check(miss)
        if found:
            explanation, first, count = found
            return f"{explanation}\n{_show(miss.plain, first, count, first)}"
    return _closest(miss)


@dataclass(frozen=True)
class _Miss:
    text: str
    plain: str
    """`text` with every line ending turned into "\\n"."""

    want: str
    """`wanted` with every line ending turned into "\\n"."""

    wanted: str
    noun: str
    whole_lines: bool

    def search(
        self, want: str, normalise: Callable[[str], str] | None = None
    ) -> tuple[int, int] | None:
        """(first line, line count) of where `want` occurs in the file once both are
        normalised (normalisations keep the line count, so offsets map back to lines)."""
        haystack, needle = self.plain, want
        if normalise:
            haystack, needle = normalise(haystack), normalise(needle)
        if not needle.strip():
            return None
        if self.whole_lines:
            haystack, needle = f"\n{haystack}\n", f"\n{needle}\n"
        index = haystack.find(needle)
        if index < 0:
            return None
        return haystack.count("\n", 0, index) + 1, want.count("\n") + 1

    def first_difference(self, first: int) -> tuple[int, str, str]:
        """(file line number, file line, wanted line) where `want`, laid over the file from
        line `first`, first differs. Unless whole lines are wanted, its first line may start
        mid-line and its last may end mid-line."""
        file_lines = self.plain.split("\n")
        want_lines = self.want.split("\n")
        last = len(want_lines) - 1
        for i, ours in enumerate(want_lines):
            number = first + i
            theirs = file_lines[number - 1] if number <= len(file_lines) else ""
            if self.whole_lines:
                same = theirs == ours
            elif last == 0:
                same = ours in theirs
            elif i == 0:
                same = theirs.endswith(ours)
            else:
                same = theirs.startswith(ours) if i == last else theirs == ours
            if not same:
                return number, theirs, ours
        return first, file_lines[first - 1], want_lines[0]


Found = tuple[str, int, int] | None
"""(explanation, first line, line count) of a region that matches after one normalisation."""


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _per_line(transform: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: "\n".join(transform(line) for line in text.split("\n"))


def _line_endings(miss: _Miss) -> Found:
    if "\r" not in miss.text + miss.wanted or "\n" not in miss.want:
        return None
    where = miss.search(miss.want)
    if where is None:
        return None
    first, count = where
    file_endings = _LINE_BREAK.findall(miss.text)[first - 1 : first - 1 + miss.want.count("\n")]
    theirs = " and ".join(sorted({_ENDING_NAMES[e] for e in file_endings}))
    ours = " and ".join(sorted({_ENDING_NAMES[e] for e in _LINE_BREAK.findall(miss.wanted)}))
    return (
        f"It matches only if line endings are ignored: {miss.noun} uses {ours}, the file's "
        f"lines {first}-{first + count - 1} end with {theirs}.",
        first,
        count,
    )


def _line_numbers(miss: _Miss) -> Found:
    prefix = _LINE_NUMBER_PREFIX.match(miss.want)
    if prefix is None:
        return None
    where = miss.search(_LINE_NUMBER_PREFIX.sub("", miss.want))
    return where and (
        f"{miss.noun} includes line-number prefixes like {prefix.group()!r}; leave them out.",
        *where,
    )


def _escapes(miss: _Miss) -> Found:
    if "\\n" not in miss.want:
        return None
    where = miss.search(miss.want.replace("\\n", "\n").replace("\\t", "\t"))
    return where and (
        f"{miss.noun} contains a literal backslash-n (\\n) where the file has a "
        "line break; write real line breaks.",
        *where,
    )


def _typography(miss: _Miss) -> Found:
    where = miss.search(miss.want, lambda text: text.translate(_TYPOGRAPHY))
    if where is None:
        return None
    first, count = where
    region = "\n".join(miss.plain.split("\n")[first - 1 : first - 1 + count])
    in_want = sorted({c for c in miss.want if ord(c) in _TYPOGRAPHY})
    in_file = sorted({c for c in region if ord(c) in _TYPOGRAPHY})
    if in_want:
        says = (
            f"{miss.noun} has typographic characters ({' '.join(in_want)}) where the file has ASCII"
        )
    else:
        says = (
            f"the file has typographic characters ({' '.join(in_file)}) where {miss.noun} has ASCII"
        )
    return f"It matches only if quotes and dashes are ignored: {says}.", first, count


def _trailing_whitespace(miss: _Miss) -> Found:
    where = miss.search(miss.want, _per_line(str.rstrip))
    if where is None:
        return None
    first, count = where
    at, theirs, ours = miss.first_difference(first)
    return (
        f"It matches only if trailing whitespace is ignored: file line {at} ends with "
        f"{_tail(theirs)!r}, {miss.noun} has {_tail(ours)!r} there.",
        first,
        count,
    )


def _indentation(miss: _Miss) -> Found:
    where = miss.search(miss.want, _per_line(str.strip))
    if where is None:
        return None
    first, count = where
    at, theirs, ours = miss.first_difference(first)
    file_indent, want_indent = _head(theirs), _head(ours)
    if ("\t" in file_indent) != ("\t" in want_indent):
        says = (
            f"the file indents line {at} with {_kind(file_indent)}, {miss.noun} with "
            f"{_kind(want_indent)}"
        )
    else:
        says = (
            f"file line {at} starts with {_describe_indent(file_indent)}, {miss.noun} has "
            f"{_describe_indent(want_indent)} there"
        )
    return f"It matches only with different indentation: {says}.", first, count


def _outer_whitespace(miss: _Miss) -> Found:
    """Matches once whitespace around the whole text goes, trying the least removal first."""
    want = miss.want
    for core in (want.rstrip(), want.lstrip(), want.strip()):
        where = miss.search(core) if core != want else None
        if where:
            lead, trail = want[: want.index(core)], want[want.index(core) + len(core) :]
            parts = [f"leading {lead!r}" if lead else "", f"trailing {trail!r}" if trail else ""]
            return (f"It matches only without its {' and '.join(p for p in parts if p)}.", *where)
    return None


def _head(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _tail(line: str) -> str:
    return line[len(line.rstrip()) :]


def _kind(indent: str) -> str:
    return "tabs" if "\t" in indent else "spaces"


def _describe_indent(indent: str) -> str:
    counts = Counter(indent)
    parts = [
        f"{n} {name}{'s' if n != 1 else ''}"
        for n, name in ((counts["\t"], "tab"), (counts[" "], "space"))
        if n
    ]
    return " and ".join(parts) or "no indentation"


def _closest(miss: _Miss) -> str:
    """The window of lines most like the wanted text, found by lines they share (exactly, or
    failing that by difflib's close matches) and ranked by difflib's similarity ratio."""
    file_lines = miss.plain.split("\n")
    want_lines = miss.want.split("\n")
    if len(want_lines) > 1 and want_lines[-1] == "":
        want_lines.pop()
    size = min(len(want_lines), len(file_lines))
    best, best_ratio = None, _MIN_SIMILARITY
    for start in _candidate_starts(file_lines, want_lines):
        start = max(0, min(start, len(file_lines) - size))
        window = "\n".join(file_lines[start : start + size])
        ratio = difflib.SequenceMatcher(None, window, miss.want, autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = start, ratio
    if best is None:
        return "Nothing similar is in the file; read it again before editing."
    first = best + 1
    at, theirs, ours = miss.first_difference(first)
    span = f"lines {first}-{first + size - 1}" if size > 1 else f"line {first}"
    return (
        f"The closest text is at {span}; the first difference is "
        f"at line {at}, where the file has {_clip(theirs)!r} and {miss.noun} has "
        f"{_clip(ours)!r}.\n" + _show(miss.plain, first, size, at)
    )


def _candidate_starts(file_lines: list[str], want_lines: list[str]) -> list[int]:
    """Window starts (0-based) voted for by lines both share, most votes first."""
    where: dict[str, list[int]] = {}
    for number, line in enumerate(file_lines):
        key = line.strip()
        if key:
            where.setdefault(key, []).append(number)
    votes: Counter[int] = Counter()
    for offset, line in enumerate(want_lines):
        for number in where.get(line.strip(), ()):
            votes[number - offset] += 1
    if not votes:
        longest = sorted(enumerate(want_lines), key=lambda item: -len(item[1].strip()))
        for offset, line in longest[:_MAX_FUZZY_LINES]:
            for match in difflib.get_close_matches(line.strip(), where, n=3, cutoff=0.6):
                for number in where[match]:
                    votes[number - offset] += 1
    return [start for start, _ in votes.most_common(_MAX_SCORED_WINDOWS)]


def _show(plain: str, first: int, count: int, focus: int) -> str:
    """Lines `first`..`first + count - 1` as `  123| text`, at most a dozen, keeping `focus`
    (the line that differs) in view."""
    file_lines = plain.split("\n")
    last = min(first + count - 1, len(file_lines))
    start = first if last - first < _MAX_SHOWN_LINES else max(first, focus - 3)
    end = min(last, start + _MAX_SHOWN_LINES - 1)
    width = len(str(end))
    shown = []
    for number in range(start, end + 1):
        shown.append(f"  {number:>{width}}| {_clip(file_lines[number - 1])}")
    return "\n".join(shown)


def _clip(line: str) -> str:
    if len(line) <= _MAX_SHOWN_CHARS:
        return line
    return f"{line[:_MAX_SHOWN_CHARS]} [... {len(line) - _MAX_SHOWN_CHARS} more characters]"
