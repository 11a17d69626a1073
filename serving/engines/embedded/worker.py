"""The engine loop on its own thread, fed from asyncio.

Forward passes are long, blocking PyTorch calls, so they cannot run on the event loop: one
worker thread owns the `LLMEngine` and steps it while any request is unfinished. Requests and
aborts cross over through a lock-protected inbox; each request's progress (its sequence after
every step that advanced it) comes back to its asyncio queue with `call_soon_threadsafe`. All
requests in flight share every forward: that is the continuous batching.
"""

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from opencomposer.serving.engines.embedded.engine import LLMEngine
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, Sequence


@dataclass(eq=False)
class _Request:
    prompt: list[int]
    options: SamplingOptions
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    seq: Sequence | None = None
    aborted: bool = False


class EngineWorker:
    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        self._inbox: list[_Request] = []
        self._live: list[_Request] = []
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="embedded-engine", daemon=True)
        self._thread.start()

    async def run(self, prompt: list[int], options: SamplingOptions) -> AsyncIterator[Sequence]:
        """The request's sequence after each step that advanced it, until it finishes.
        Closing the iterator early aborts the request and frees its blocks."""
        request = _Request(prompt, options, asyncio.get_running_loop())
        with self._wake:
            if self._closed:
                raise RuntimeError("the engine has been shut down")
            self._inbox.append(request)
            self._wake.notify()
        try:
            while True:
                item = await request.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finished:
                    return
        finally:
            if request.seq is None or not request.seq.finished:
                with self._wake:
                    request.aborted = True
                    self._wake.notify()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not (self._closed or self._inbox or self.engine.has_work()
                           or any(r.aborted for r in self._live)):
                    self._wake.wait()
                if self._closed:
                    return
                arrived, self._inbox = self._inbox, []
            self._admit(arrived)
            self._drop_aborted()
            try:
                advanced = set(map(id, self.engine.step()))
            except Exception as exc:  # a failed forward fails its requests, not the worker
                for request in self._live:
                    request.loop.call_soon_threadsafe(request.queue.put_nowait, exc)
                    if request.seq is not None:
                        self.engine.abort(request.seq)
                self._live.clear()
                continue
            for request in list(self._live):
                seq = request.seq
                if seq is not None and (id(seq) in advanced or seq.finished):
                    request.loop.call_soon_threadsafe(request.queue.put_nowait, seq)
                    if seq.finished:
                        self._live.remove(request)

    def _admit(self, arrived: list[_Request]) -> None:
        for request in arrived:
            try:
                request.seq = self.engine.add(request.prompt, request.options)
            except ValueError as exc:
                request.loop.call_soon_threadsafe(request.queue.put_nowait, exc)
                continue
            self._live.append(request)

    def _drop_aborted(self) -> None:
        for request in [r for r in self._live if r.aborted]:
            if request.seq is not None:
                self.engine.abort(request.seq)
            self._live.remove(request)
