"""LSP's base protocol, read strictly: a block of header lines, then exactly Content-Length bytes.

pygls' own reader looks for a `Content-Length: N` line and skips every line it does not
understand, so one bad header makes it read the next message's body as headers (out of step
for good), and it reads whatever length it is told (10**12 ends in a MemoryError). Here each
header line is ASCII `Name: value` ending in CRLF, the block ends with an empty line within
MAX_HEADER_BYTES, `Content-Length` is there once, decimal, from 1 to the reader's limit, and a
body is complete. Anything else is a FramingError: the stream can no longer be trusted to be in
step, and the caller ends the connection. A body is only bytes here: whether it is JSON-RPC is
the dispatcher's business, and a bad one leaves the stream in step.
"""

import asyncio
import re
from concurrent.futures import Executor
from typing import Protocol

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest body an editor may send. The biggest message is a `didOpen` carrying a whole
document; VS Code keeps documents over 50 MiB from extensions (`TextModel._MODEL_SYNC_LIMIT`),
and 64 MiB leaves that text 28 % for its JSON escapes."""

MAX_HEADER_BYTES = 8 * 1024
"""The largest header block, its empty line included. Editors send `Content-Length` and at most
`Content-Type`: under 100 bytes."""

READ_BYTES = 64 * 1024
"""What one read asks for: a Linux pipe's capacity, so a read empties a full pipe."""

_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # RFC 9110's field name
_VALUE = rb"[\t\x20-\x7e]*"  # visible ASCII, spaces and tabs
_HEADER_LINE = re.compile(rb"(%s):(%s)\r\n" % (_TOKEN, _VALUE))
_LINE_START = re.compile(rb"\r|(?:%s)?|%s:%s\r?" % (_TOKEN, _TOKEN, _VALUE))
"""What the part of a line received so far may be: the start of a header line or of the empty
one. Anything else fails at once, not when its line ends (a body sent without headers has no
line end to wait for)."""
_DIGITS = re.compile(rb"[0-9]+")


class FramingError(Exception):
    """The bytes are not a sequence of LSP messages; the message says where they stop being one."""


class ByteSource(Protocol):
    """What `asyncio.StreamReader` offers, and `ThreadedSource` for a blocking stream."""

    async def read(self, n: int) -> bytes:
        """Between 1 and `n` bytes, waiting for the first; b"" once the stream has ended."""
        ...


class BlockingInput(Protocol):
    """A buffered binary stream, such as `sys.stdin.buffer`."""

    def read1(self, size: int = ..., /) -> bytes: ...


class ThreadedSource:
    """A blocking stream (the server's stdin) read in a worker thread, so that the event loop
    keeps serving while the editor is silent. `read1` returns what one read of the pipe gives
    instead of waiting for `n` bytes, as `read` would."""

    def __init__(self, stream: BlockingInput, executor: Executor | None) -> None:
        self._stream = stream
        self._executor = executor

    async def read(self, n: int) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._stream.read1, n)


class MessageReader:
    """Message bodies from a byte stream, one at a time. Memory grows with the bytes that
    arrive, never with the length a header declares: a body is read in pieces of at most what
    is still missing of it."""

    def __init__(self, source: ByteSource, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.source = source
        self.max_message_bytes = max_message_bytes
        """The largest Content-Length accepted; a caller may raise it between messages (the
        TCP listener does once a connection has authenticated)."""
        self._buffer = bytearray()

    async def next_message(self) -> bytearray | None:
        """The next body; None when the stream ends between two messages (the client is gone).
        Raises FramingError for anything else, an end inside a message included."""
        headers = await self._header_block()
        if headers is None:
            return None
        return await self._body(self._content_length(headers))

    async def _header_block(self) -> list[tuple[bytes, bytes]] | None:
        headers: list[tuple[bytes, bytes]] = []
        size = 0
        while True:
            end = self._buffer.find(b"\n") + 1
            if end == 0:  # the line is still arriving
                if not _LINE_START.fullmatch(self._buffer):
                    raise FramingError(f"not an LSP header line: {_shown(self._buffer)}")
                if size + len(self._buffer) > MAX_HEADER_BYTES:
                    raise FramingError(f"a header block longer than {MAX_HEADER_BYTES} bytes")
                if not await self._fill(READ_BYTES):
                    if headers or self._buffer:
                        raise FramingError("the stream ended inside a header block")
                    return None
                continue
            line = bytes(self._buffer[:end])
            del self._buffer[:end]
            size += end
            if size > MAX_HEADER_BYTES:
                raise FramingError(f"a header block longer than {MAX_HEADER_BYTES} bytes")
            if line == b"\r\n":
                return headers
            match = _HEADER_LINE.fullmatch(line)
            if match is None:
                raise FramingError(f"not an LSP header line: {_shown(line)}")
            headers.append((match[1].lower(), match[2].strip(b" \t")))

    def _content_length(self, headers: list[tuple[bytes, bytes]]) -> int:
        """Other headers are ignored, as the spec allows (`Content-Type` is the only one it
        defines, and a body is JSON in UTF-8 whatever it says)."""
        values = [value for name, value in headers if name == b"content-length"]
        if not values:
            raise FramingError("a message without Content-Length")
        if len(values) > 1:
            raise FramingError(f"a message with {len(values)} Content-Length headers")
        [value] = values
        if not _DIGITS.fullmatch(value):
            raise FramingError(f"Content-Length is not a decimal number: {_shown(value)}")
        digits = value.lstrip(b"0")
        # Compared as text first: int() refuses numbers of over 4300 digits.
        if (
            len(digits) > len(str(self.max_message_bytes))
            or int(digits or b"0") > self.max_message_bytes
        ):
            raise FramingError(
                f"Content-Length {_shown(value)} is over the limit of "
                f"{self.max_message_bytes} bytes"
            )
        if not digits:
            raise FramingError("Content-Length is 0: a message is a JSON value")
        return int(digits)

    async def _body(self, length: int) -> bytearray:
        while len(self._buffer) < length:
            if not await self._fill(min(length - len(self._buffer), READ_BYTES)):
                raise FramingError(
                    f"the stream ended inside a message ({len(self._buffer)} of {length} bytes)"
                )
        if len(self._buffer) == length:  # the usual case for a large body: no copy
            body, self._buffer = self._buffer, bytearray()
            return body
        body = self._buffer[:length]
        del self._buffer[:length]
        return body

    async def _fill(self, n: int) -> bool:
        chunk = await self.source.read(n)
        self._buffer += chunk
        return bool(chunk)


def frame(body: bytes) -> bytes:
    """A message as it goes on the wire (pygls' writer frames the server's own messages)."""
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _shown(data: bytes | bytearray) -> str:
    """Bytes from the client as they go in a log line: escaped, and short."""
    return repr(bytes(data[:60])) + (" ..." if len(data) > 60 else "")
