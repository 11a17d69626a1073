"""Text files as the tools see them: decoded, with their on-disk format remembered so that a
write puts back the same encoding, byte-order mark, line endings and final newline.

Decoding order: a byte-order mark decides; else strict UTF-8; else the legacy code page that
charset-normalizer finds cleanest; else Latin-1, which decodes any byte sequence. A NUL byte
in the first 8 KiB (and no UTF-16/32 mark) means binary: such files are reported, never
decoded.

Choosing a code page: charset-normalizer skips code pages similar to one it has already
accepted, so for short Western text its answer is an arbitrary one of many that decode
cleanly (`café` came back as cp1006, Urdu). So cp1252, the code page of legacy Western files
(Latin-1 plus printable 0x80-0x9F: every Latin-1 text file without C1 controls is valid
cp1252 and encodes back to the same bytes), is always scored as well, by charset-normalizer's
own measures, and wins unless the other reading is less messy, or as clean and more coherent
as a language: Russian in cp1251, Japanese in Shift-JIS or Turkish in cp1254 keep their code
page, and bytes cp1252 leaves undefined, or makes a mess of, are never read as cp1252.
"""

import codecs
import re
from dataclasses import dataclass, replace

import charset_normalizer

_SNIFF_BYTES = 8192
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# charset-normalizer's chaos score: lower is cleaner; above this its guess is no better than
# Latin-1 (measured on Latin-1 and CP-1252 source files, which score 0.0-0.1 when right).
_MAX_CHAOS = 0.2
# Scores this close are a tie, which the more common code page wins: charset-normalizer's
# scores move in steps of about 0.07 on a one-line text, so a tie is "the same".
_SAME_SCORE = 0.01
_WESTERN = "cp1252"


class BinaryFile(Exception):
    """The bytes are not text."""


@dataclass(frozen=True)
class TextFormat:
    encoding: str
    """Python codec name, e.g. `utf-8`, `utf-16-le`, `latin-1`."""

    bom: bool = False
    newline: str = "\n"
    """The file's dominant line ending: `\\n`, `\\r\\n` or `\\r`."""

    mixed_newlines: bool = False

    @property
    def label(self) -> str:
        """How clients show it: `utf-8`, `utf-8 with BOM, CRLF`, ..."""
        parts = [self.encoding + (" with BOM" if self.bom else "")]
        if self.newline != "\n":
            parts.append({"\r\n": "CRLF", "\r": "CR"}[self.newline])
        return ", ".join(parts)


@dataclass(frozen=True)
class TextFile:
    text: str
    """Decoded content, line endings as in the file."""

    format: TextFormat

    def with_text(self, text: str) -> "TextFile":
        return replace(self, text=text)

    def encode(self) -> bytes:
        """Bytes in the original format (encoding and BOM; line endings are in the text)."""
        data = self.text.encode(self.format.encoding)
        if self.format.bom:
            bom = next(b for b, name in _BOMS if name == self.format.encoding)
            data = bom + data
        return data


def is_binary(data: bytes) -> bool:
    head = data[:_SNIFF_BYTES]
    return b"\x00" in head and not any(head.startswith(bom) for bom, _ in _BOMS)


def decode(data: bytes) -> TextFile:
    """Decode file bytes; raises BinaryFile for non-text."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise BinaryFile(f"starts with a {encoding} mark but does not decode") from exc
            return TextFile(text, _format(text, encoding, bom=True))
    if is_binary(data):
        raise BinaryFile("contains NUL bytes")
    try:
        text = data.decode("utf-8")
        return TextFile(text, _format(text, "utf-8"))
    except UnicodeDecodeError:
        pass
    chosen = _legacy_code_page(data)
    if chosen is not None:
        encoding = codecs.lookup(chosen.encoding).name
        text = str(chosen)
        return TextFile(text, _format(text, encoding))
    text = data.decode("latin-1")
    return TextFile(text, _format(text, "latin-1"))


def _legacy_code_page(data: bytes) -> charset_normalizer.CharsetMatch | None:
    """The cleanest reading of non-UTF-8 bytes, or None when none is clean enough; the module
    docstring says how the two candidates are ranked."""
    best = _clean(charset_normalizer.from_bytes(data).best())
    western = _clean(charset_normalizer.from_bytes(data, cp_isolation=[_WESTERN]).best())
    if best is None or western is None:
        return western or best
    cleaner = best.chaos < western.chaos - _SAME_SCORE
    more_coherent = (
        abs(best.chaos - western.chaos) <= _SAME_SCORE
        and best.coherence > western.coherence + _SAME_SCORE
    )
    return best if cleaner or more_coherent else western


def _clean(match: charset_normalizer.CharsetMatch | None) -> charset_normalizer.CharsetMatch | None:
    if match is None or match.chaos > _MAX_CHAOS or match.encoding in ("ascii", "utf_8"):
        return None
    return match


def new_file(text: str) -> TextFile:
    """A file the agent creates: UTF-8, no BOM, newlines as given."""
    return TextFile(text, _format(text, "utf-8"))


def _format(text: str, encoding: str, bom: bool = False) -> TextFormat:
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    counts = {"\n": lf, "\r\n": crlf, "\r": cr}
    newline = max(counts, key=lambda k: (counts[k], k == "\n"))
    mixed = sum(1 for n in counts.values() if n) > 1
    return TextFormat(encoding=encoding, bom=bom, newline=newline, mixed_newlines=mixed)


def to_file_newlines(text: str, newline: str) -> str:
    """Turn `\\n` line endings (as models write) into the file's style."""
    if newline == "\n" or (newline == "\r\n" and "\r" in text):
        return text
    return text.replace("\n", newline)


def split_lines(text: str) -> list[str]:
    """Lines without their endings, for any mix of `\\n`, `\\r\\n` and `\\r` (unlike
    `str.splitlines`, form feeds and other Unicode separators stay inside their line)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


_LINE_WITH_ENDING = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lines_with_endings(text: str) -> list[str]:
    """Lines keeping their endings, split only at `\\n`, `\\r\\n` and `\\r`."""
    return _LINE_WITH_ENDING.findall(text)
