"""Decoding keeps every file's format, so writing back changes nothing but the text."""

import codecs

import pytest

from opencomposer.agent.tools.textfile import (
    BinaryFile,
    TextFormat,
    decode,
    lines_with_endings,
    split_lines,
    to_file_newlines,
)

SAMPLES = {
    "utf-8": "naïve ✓ 𝄞\n".encode(),
    "utf-8 with BOM": codecs.BOM_UTF8 + "x = 'é'\r\n".encode(),
    "utf-16-le with BOM": codecs.BOM_UTF16_LE + "héllo\r\nwörld\r\n".encode("utf-16-le"),
    "utf-16-be with BOM": codecs.BOM_UTF16_BE + "a\nb".encode("utf-16-be"),
    "latin-1": "caf\xe9 cr\xe8me br\xfbl\xe9e, \xe0 la fran\xe7aise\n".encode("latin-1"),
    "cr only": b"a\rb\rc\r",
}


@pytest.mark.parametrize("name", SAMPLES)
def test_decode_then_encode_is_byte_identical(name):
    data = SAMPLES[name]
    assert decode(data).encode() == data


def test_formats_are_reported():
    assert decode(SAMPLES["utf-8 with BOM"]).format == TextFormat("utf-8", bom=True, newline="\r\n")
    assert decode(SAMPLES["utf-16-le with BOM"]).format.label == "utf-16-le with BOM, CRLF"
    assert decode(SAMPLES["cr only"]).format.newline == "\r"
    assert decode(b"a\r\nb\nc\r\n").format == TextFormat(
        "utf-8", newline="\r\n", mixed_newlines=True
    )
    latin = decode(SAMPLES["latin-1"])
    assert (latin.format.encoding, latin.text) == ("cp1252", "café crème brûlée, à la française\n")


# Short Western texts decode cleanly in many code pages; they must come back as cp1252 (which
# reads every Latin-1 text file the same way), while texts of other code pages keep theirs.
LEGACY = [
    ("latin-1", "café au lait\n", "cp1252"),
    ("latin-1", "Grüße aus München, schöne Straße\n", "cp1252"),
    ("latin-1", "¿Dónde está el niño? Mañana.\n", "cp1252"),
    ("latin-1", "Le garçon a mangé une crème brûlée à la fenêtre.\n", "cp1252"),
    ("cp1252", "print(\u201cIt\u2019s 5\u20ac\u201d)  # \u2014 curly quotes\n", "cp1252"),
    (
        "cp1251",
        "Привет, мир! Это тестовый файл на русском языке, достаточно длинный для "
        "определения кодировки.\n",
        "cp1251",
    ),
    (
        "shift_jis",
        "これは日本語のテキストです。文字コードの判定に十分な長さの文章を用意しました。"
        "よろしくお願いします。\n",
        "cp932",
    ),
    ("cp1253", "Καλημέρα κόσμε, αυτό είναι ένα ελληνικό κείμενο.\n", "cp1253"),
    ("cp1254", "Günaydın, nasılsın? Bugün hava çok güzel.\n", "cp1254"),  # noqa: RUF001 (dotless i)
]


@pytest.mark.parametrize(("written_as", "text", "read_as"), LEGACY)
def test_legacy_code_pages_are_read_as_written(written_as: str, text: str, read_as: str):
    data = text.encode(written_as)
    document = decode(data)
    assert (document.format.encoding, document.text) == (read_as, text)
    assert document.encode() == data


def test_bytes_cp1252_leaves_undefined_are_not_read_as_cp1252():
    document = decode(b"caf\xe9 \x81\x8d\x8f\x90\x9d\n")
    assert document.format.encoding != "cp1252"
    assert document.encode() == b"caf\xe9 \x81\x8d\x8f\x90\x9d\n"


@pytest.mark.parametrize("data", [b"\x00\x01\x02binary", b"PK\x03\x04\x00\x00" + bytes(100)])
def test_binary_is_refused(data):
    with pytest.raises(BinaryFile):
        decode(data)


def test_lines_ignore_unicode_separators():
    text = "a\x0cb\r\nc\u2028d\re\n"
    assert split_lines(text) == ["a\x0cb", "c\u2028d", "e"]
    assert lines_with_endings(text) == ["a\x0cb\r\n", "c\u2028d\r", "e\n"]
    assert split_lines("") == [] and split_lines("x") == ["x"]


def test_model_newlines_become_the_files():
    assert to_file_newlines("a\nb\n", "\r\n") == "a\r\nb\r\n"
    assert to_file_newlines("a\r\nb", "\r\n") == "a\r\nb"  # already in the file's style
    assert to_file_newlines("a\nb", "\n") == "a\nb"
