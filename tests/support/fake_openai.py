"""A fake OpenAI-compatible upstream: a real HTTP/1.1 server on loopback that replays
recorded SSE streams (tests/support/streams/*.sse) and whole replies (*.json), and
misbehaves on request. A request that does not stream gets a scenario's whole reply: a
recorded one (`Whole`), or a `Compose` written out whole. `props`, when set, is served at
`/props` as llama.cpp's server does.

It speaks raw HTTP over asyncio streams rather than through a web framework, so a test can
make it do what real servers do when they break: die mid-chunk, stall forever, send garbage,
or stream until the client hangs up (which it records).
"""

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STREAMS = Path(__file__).parent / "streams"
DONE = b"data: [DONE]\n\n"


def sse_events(name: str) -> list[bytes]:
    """The events of a recorded stream, each with its trailing blank line. Comment lines
    (`:`), which say where a recording comes from, are not sent: a file of comments alone
    is a stream with no event in it."""
    lines = (STREAMS / f"{name}.sse").read_bytes().split(b"\n")
    raw = b"\n".join(line for line in lines if not line.startswith(b":"))
    return [event + b"\n\n" for event in raw.strip().split(b"\n\n") if event.strip()]


def recorded(name: str) -> Any:
    """A recorded JSON answer (tests/support/streams/*.json; their sources: README.md)."""
    return json.loads((STREAMS / f"{name}.json").read_text())


@dataclass
class Replay:
    """Replay a recorded stream. `split`: write every N bytes as its own chunk so events
    break mid-line; `die_after`: close the connection abruptly after that many events;
    `stall_after`: stop sending (without closing) after that many events."""

    stream: str
    split: int | None = None
    die_after: int | None = None
    stall_after: int | None = None
    delay: float = 0.0


@dataclass
class Status:
    """Answer with an HTTP error and a JSON body."""

    code: int
    body: dict[str, Any]


@dataclass
class HangUp:
    """Close the connection without any answer, not even a status line: what
    llama-cpp-python 0.3.36 does when the model of a streamed request with tools and
    `tool_choice` auto picks a tool (`chatml_function_calling` raises "Automatic streaming
    tool choice is not supported" before the response starts; llama_cpp/llama_chat_format.py,
    seen against the real server by `make test-upstreams`)."""


@dataclass
class Endless:
    """Stream content chunks until the client disconnects."""

    interval: float = 0.02


@dataclass
class Compose:
    """Stream a reply made up on the spot, chunked as OpenAI servers send it: text in small
    pieces, then each tool call (name first, arguments in two fragments), then usage."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    """Seconds between events, so that a client can be seen rendering a partial reply."""

    def events(self) -> list[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            body = {
                "id": "chatcmpl-c",
                "object": "chat.completion.chunk",
                "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            return f"data: {json.dumps(body)}\n\n".encode()

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": self.text[i : i + 5]}) for i in range(0, len(self.text), 5)]
        for index, (name, arguments) in enumerate(self.calls):
            text = json.dumps(arguments)
            half = len(text) // 2
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": f"call_{index}",
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for piece in (text[:half], text[half:]):
                events.append(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                )
        events.append(chunk({}, self.finish_reason))
        final = {
            "id": "chatcmpl-c",
            "object": "chat.completion.chunk",
            "model": "fake-model",
            "choices": [],
            "usage": COMPOSED_USAGE,
        }
        events.append(f"data: {json.dumps(final)}\n\n".encode())
        return [*events, DONE]

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"

    def whole(self) -> dict[str, Any]:
        """The same reply as a non-streamed `chat.completion`."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{index}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(self.calls)
            ]
        return {
            "id": "chatcmpl-c",
            "object": "chat.completion",
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": COMPOSED_USAGE,
        }


COMPOSED_USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


@dataclass
class Whole:
    """Answer a request that does not stream with a recorded reply (`<name>.json`), or with
    the reply given."""

    reply: str | dict[str, Any]


@dataclass
class Fill:
    """Stream a text completion (`/v1/completions`, as inline completion asks), in pieces."""

    text: str

    def events(self) -> list[bytes]:
        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            body = {
                "id": "cmpl-f",
                "object": "text_completion",
                "model": "fake-model",
                "choices": choices,
                **extra,
            }
            return f"data: {json.dumps(body)}\n\n".encode()

        def piece(text: str, finish: str | None = None) -> bytes:
            return chunk([{"index": 0, "text": text, "finish_reason": finish}])

        usage = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
        return [
            *(piece(self.text[i : i + 4]) for i in range(0, len(self.text), 4)),
            piece("", "stop"),
            chunk([], usage=usage),
            DONE,
        ]


Scenario = Replay | Status | HangUp | Endless | Compose | Fill | Whole


@dataclass
class FakeOpenAI:
    models: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {"id": "fake-model", "object": "model", "owned_by": "tests", "max_model_len": 8192}
        ]
    )
    scenarios: deque[Scenario] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    fill: Fill | None = None
    """When set, every text completion gets it (the queue is for chat); else they queue too."""

    props: dict[str, Any] | None = None
    """What `GET /props` answers (llama.cpp's server properties); unset: 404, as elsewhere."""

    disconnects: int = 0
    props_requests: int = 0
    port: int = 0
    _server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The chat requests alone: an editor also asks for inline completions as it likes."""
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def enqueue(self, *scenarios: Scenario) -> None:
        self.scenarios.extend(scenarios)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def wait_for_disconnect(self, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while not self.disconnects:
                await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        line = await reader.readline()
        if not line:
            return False
        method, target, _ = line.decode().split(" ", 2)
        headers: dict[str, str] = {}
        while (header := await reader.readline()) not in (b"\r\n", b""):
            key, _, value = header.decode().partition(":")
            headers[key.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "GET" and target.endswith("/models"):
            await self._json(writer, 200, {"object": "list", "data": self.models})
            return True
        if method == "GET" and target == "/props":
            self.props_requests += 1
            if self.props is not None:
                await self._json(writer, 200, self.props)
                return True
        if method == "POST" and target.endswith("/completions"):  # chat and text
            self.requests.append({"headers": headers, "body": json.loads(body), "path": target})
            text_completion = not target.endswith("/chat/completions")
            scenario = (
                self.fill
                if text_completion and self.fill is not None
                else self.scenarios.popleft()
                if self.scenarios
                else None
            )
            if scenario is None:
                await self._json(writer, 500, {"error": {"message": "no scenario queued"}})
                return True
            if isinstance(scenario, Status):
                await self._json(writer, scenario.code, scenario.body)
                return True
            if isinstance(scenario, HangUp):
                return False  # the connection closes with nothing sent
            if not json.loads(body).get("stream"):
                await self._whole(writer, scenario)
                return True
            if isinstance(scenario, Whole):
                await self._json(writer, 500, {"error": {"message": "a whole reply streamed"}})
                return True
            return await self._stream(reader, writer, scenario)
        await self._json(writer, 404, {"error": {"message": f"no route {method} {target}"}})
        return True

    async def _whole(self, writer: asyncio.StreamWriter, scenario: Scenario) -> None:
        """A non-streamed request's answer: a recorded or composed reply, else a 500 that
        says the test queued a stream for a request that does not stream."""
        if isinstance(scenario, Whole):
            reply = scenario.reply
            await self._json(writer, 200, recorded(reply) if isinstance(reply, str) else reply)
        elif isinstance(scenario, Compose):
            await self._json(writer, 200, scenario.whole())
        else:
            message = f"{type(scenario).__name__} streams, but the request does not"
            await self._json(writer, 500, {"error": {"message": message}})

    async def _json(self, writer: asyncio.StreamWriter, code: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()

    async def _stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        scenario: Replay | Endless | Compose | Fill,
    ) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        hangup = asyncio.ensure_future(reader.read(1))  # completes when the client closes
        try:
            if isinstance(scenario, Endless):
                await self._endless(writer, scenario, hangup)
                return False
            if isinstance(scenario, Compose | Fill):
                for event in scenario.events():
                    await self._chunk(writer, event)
                    if isinstance(scenario, Compose) and scenario.delay:
                        await asyncio.sleep(scenario.delay)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return True
            return await self._replay(writer, scenario, hangup)
        finally:
            hangup.cancel()

    async def _chunk(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()

    async def _replay(
        self, writer: asyncio.StreamWriter, scenario: Replay, hangup: asyncio.Future
    ) -> bool:
        events = sse_events(scenario.stream)
        for number, event in enumerate(events):
            if number == scenario.die_after:
                writer.transport.abort()  # no terminating chunk: a broken body
                return False
            if number == scenario.stall_after:
                await hangup
                self.disconnects += 1
                return False
            pieces = (
                [event[i : i + scenario.split] for i in range(0, len(event), scenario.split)]
                if scenario.split
                else [event]
            )
            for piece in pieces:
                await self._chunk(writer, piece)
            if scenario.delay:
                await asyncio.sleep(scenario.delay)
        if scenario.die_after == len(events):  # cut before the end (an empty stream too)
            writer.transport.abort()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _endless(
        self, writer: asyncio.StreamWriter, scenario: Endless, hangup: asyncio.Future
    ) -> None:
        chunk = {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "fake-model",
            "choices": [{"index": 0, "delta": {"content": "tick "}, "finish_reason": None}],
        }
        data = f"data: {json.dumps(chunk)}\n\n".encode()
        while not hangup.done():
            try:
                await self._chunk(writer, data)
            except ConnectionError:
                break
            await asyncio.sleep(scenario.interval)
        self.disconnects += 1


class ThreadedFakeOpenAI:
    """The fake on its own event loop in a thread, for tests that block (CLI subprocesses)."""

    def __init__(self) -> None:
        self.fake = FakeOpenAI()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self._loop).result(5)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _stop(self) -> None:
        """Stop listening and end the connections still open (a client's kept-alive one):
        a handler left pending when the loop closes fails later, in whichever test the
        garbage collector reaches it."""
        await self.fake.stop()
        handlers = asyncio.all_tasks() - {asyncio.current_task()}
        for handler in handlers:
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
