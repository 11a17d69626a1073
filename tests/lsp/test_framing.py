"""The strict LSP message reader, on byte streams given piece by piece: what it accepts, what
stops it (at once, not after waiting for bytes that would not help), and that its memory follows
the bytes received, never the length a header declares. The real server fed the same streams is
in tests/security/test_lsp_framing.py."""

import json
import tracemalloc

import pytest

from opencomposer.lsp.framing import (
    MAX_HEADER_BYTES,
    MAX_MESSAGE_BYTES,
    READ_BYTES,
    FramingError,
    MessageReader,
    frame,
)


class Pieces:
    """A byte source that gives `pieces` one read at a time, then the end of the stream;
    `then_fail` makes a read past them fail the test instead (the reader had no need for it)."""

    def __init__(self, *pieces: bytes, then_fail: bool = False) -> None:
        self.pieces = list(pieces)
        self.then_fail = then_fail
        self.reads = 0

    async def read(self, n: int) -> bytes:
        assert n > 0
        self.reads += 1
        if not self.pieces:
            assert not self.then_fail, "read past what the client sent"
            return b""
        piece = self.pieces.pop(0)
        if len(piece) > n:
            self.pieces.insert(0, piece[n:])
        return piece[:n]


class Endless:
    """A client that never stops sending `piece`."""

    def __init__(self, piece: bytes, head: bytes = b"") -> None:
        self.piece = piece
        self.head = head
        self.sent = 0

    async def read(self, n: int) -> bytes:
        data = self.head or self.piece * max(1, n // len(self.piece))
        self.head = b""
        self.sent += len(data[:n])
        return data[:n]


async def bodies(source: Pieces | Endless, **options: int) -> list[bytes]:
    reader = MessageReader(source, **options)
    found = []
    while (body := await reader.next_message()) is not None:
        found.append(bytes(body))
    return found


REQUEST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}).encode()
UNICODE = json.dumps(
    {"jsonrpc": "2.0", "method": "x", "params": "é 世界 🎉"}, ensure_ascii=False
).encode()


async def test_several_messages_in_one_read_and_one_message_in_many():
    stream = frame(REQUEST) + frame(UNICODE) + frame(b"{}")

    assert await bodies(Pieces(stream)) == [REQUEST, UNICODE, b"{}"]
    assert await bodies(Pieces(*(stream[i : i + 1] for i in range(len(stream))))) == [
        REQUEST,
        UNICODE,
        b"{}",
    ]


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
        b"Content-Type: application/vscode-jsonrpc; charset=utf8\r\nContent-Length: %d\r\n\r\n",
        b"content-length: %d\r\n\r\n",
        b"Content-Length:\t %d  \r\nX-Trace-Id: 42\r\n\r\n",  # spaces around; an unknown header
        b"Content-Length: 000%d\r\n\r\n",
    ],
    ids=["with Content-Type", "Content-Type first", "lower case", "white space", "leading zeros"],
)
async def test_headers_the_spec_allows(head):
    assert await bodies(Pieces(head % len(UNICODE) + UNICODE)) == [UNICODE]


async def test_a_body_of_exactly_the_limit_is_read():
    body = b'"' + b"a" * 998 + b'"'

    assert await bodies(Pieces(frame(body)), max_message_bytes=1000) == [body]


@pytest.mark.parametrize(
    ("stream", "says"),
    [
        (b"Content-Length: abc\r\n\r\n{}", "Content-Length is not a decimal number: b'abc'"),
        (b"Content-Length: -5\r\n\r\n{}", "not a decimal number: b'-5'"),
        (b"Content-Length: +5\r\n\r\n{}", "not a decimal number"),
        (b"Content-Length: 0x10\r\n\r\n{}", "not a decimal number"),
        (b"Content-Length: 1e3\r\n\r\n{}", "not a decimal number"),
        (b"Content-Length: 2 2\r\n\r\n{}", "not a decimal number"),
        (b"Content-Length:\r\n\r\n{}", "not a decimal number: b''"),
        (b"Content-Length: 0\r\n\r\n" + frame(REQUEST), "Content-Length is 0"),
        (b"Content-Length: 000\r\n\r\n", "Content-Length is 0"),
        (b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + REQUEST, "without Content-Length"),
        (b"\r\n" + frame(REQUEST), "without Content-Length"),
        (b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", "2 Content-Length headers"),
        (b"Content-Length: 2\r\nContent-Length: 7\r\n\r\n{}", "2 Content-Length headers"),
        (b"Content-Length: 1000000000000\r\n\r\n", "b'1000000000000' is over the limit"),
        (b"Content-Length: %d\r\n\r\n" % (MAX_MESSAGE_BYTES + 1), "is over the limit of 67108864"),
        (b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n", "is over the limit"),  # int() refuses it
        (b"Content-Length: %d\r\n" % len(REQUEST) + REQUEST, "not an LSP header line: b'{"),
        (b"Content-Length: %d\n\n" % len(REQUEST) + REQUEST, "not an LSP header line"),
        (b"Content-Length: 2\r5\r\n\r\n{}", "not an LSP header line"),
        (b"Content-Length : 2\r\n\r\n{}", "not an LSP header line"),
        (b"Content-Length: \xd9\xa3\r\n\r\n{}", "not an LSP header line"),  # an Arabic 3
        (b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "not an LSP header line: b'POST /"),
        (b"\x00\x9f\x92\x96 binary", "not an LSP header line: b'\\x00"),
        (frame(REQUEST) + b"garbage after a message", "not an LSP header line: b'garbage"),
        # Declared too short: the rest of the body is read as the next message's headers.
        (b"Content-Length: 20\r\n\r\n" + REQUEST + frame(REQUEST), "not an LSP header line"),
    ],
)
async def test_a_stream_that_is_not_lsp_stops_at_once(stream, says):
    source = Pieces(stream, then_fail=True)

    with pytest.raises(FramingError) as raised:
        await bodies(source)

    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("stream", "says"),
    [
        (b"Content-Length: 10\r\n", "ended inside a header block"),
        (b"Content-Len", "ended inside a header block"),
        (
            b"Content-Length: 100\r\n\r\n" + REQUEST,
            f"ended inside a message ({len(REQUEST)} of 100",
        ),
    ],
)
async def test_a_stream_that_ends_inside_a_message_is_an_error(stream, says):
    with pytest.raises(FramingError) as raised:
        await bodies(Pieces(stream))

    assert says in str(raised.value)


@pytest.mark.parametrize(
    "source",
    [
        Endless(b"a", head=b"X-Pad: "),  # one endless line
        Endless(b"X-Pad: a\r\n"),  # endless short lines
        Endless(b"Content-Length: 2\r\n"),
    ],
    ids=["one line", "many lines", "repeated Content-Length"],
)
async def test_a_header_block_is_bounded(source):
    with pytest.raises(FramingError, match=f"longer than {MAX_HEADER_BYTES} bytes"):
        await bodies(source)

    assert source.sent <= MAX_HEADER_BYTES + READ_BYTES


@pytest.mark.parametrize("declared", [MAX_MESSAGE_BYTES, 10**12])
async def test_memory_follows_the_bytes_received_not_the_length_declared(declared):
    source = Pieces(b"Content-Length: %d\r\n\r\n" % declared, b"[" + b"1," * 500)
    tracemalloc.start()
    try:
        with pytest.raises(FramingError):
            await bodies(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 1024 * 1024  # 64 MiB had the declared length been allocated


async def test_the_limit_may_be_raised_between_messages():
    big = b'"' + b"a" * 2000 + b'"'
    reader = MessageReader(Pieces(frame(b"{}") + frame(big)), max_message_bytes=1000)

    assert await reader.next_message() == b"{}"
    reader.max_message_bytes = MAX_MESSAGE_BYTES
    assert await reader.next_message() == big
    assert await reader.next_message() is None
