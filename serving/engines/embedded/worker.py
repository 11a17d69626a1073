"""The engine loop on its own thread, fed from asyncio.

Forward passes are long, blocking PyTorch calls, so they cannot run on the event loop: one
worker thread owns the `LLMEngine` and steps it while any request is unfinished. Requests and
aborts cross over through a lock-protected inbox; each request's progress comes back to its
asyncio queue with `call_soon_threadsafe`, as a `Progress` copied on the worker thread after
every step that advanced it (the engine keeps changing its sequences, so the event loop never
reads one). All requests in flight share every forward: that is the continuous batching.
"""

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from opencomposer.serving.engines.embedded.engine import LLMEngine
from opencomposer.serving.engines.embedded.sequence import SamplingOptions, Sequence, SpecStats


class WorkerClosed(Exception):
    """The worker was shut down before the request finished."""


@dataclass(frozen=True)
class Progress:
    """A request's state after a step, as of that step."""

    output_ids: list[int]
    """Every token sampled so far (stop tokens included)."""

    finished: bool
    finish_reason: str | None
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    routed_experts: list[Tensor]
    spec: SpecStats
    cached_prompt_tokens: int
    """Prompt tokens the prefix cache held (OpenAI's `cached_tokens`)."""

    @classmethod
    def of(cls, seq: Sequence) -> "Progress":
        spec = seq.spec
        return cls(
            seq.output_ids,
            seq.finished,
            seq.finish_reason,
            list(seq.logprobs),
            list(seq.top_logprobs),
            list(seq.routed_experts),
            SpecStats(spec.verify_steps, spec.drafted, spec.accepted),
            seq.prompt_cache_hits or 0,
        )


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
        self._between: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="embedded-engine", daemon=True)
        self._thread.start()

    async def run(
        self, prompt: list[int], options: SamplingOptions
    ) -> AsyncGenerator[Progress, None]:
        """The request's progress after each step that advanced it, until it finishes.
        Closing the iterator early aborts the request and frees its blocks. Raises what
        admitting or stepping the request raised, or `WorkerClosed`."""
        request = _Request(prompt, options, asyncio.get_running_loop())
        with self._wake:
            if self._closed:
                raise WorkerClosed("the engine has been shut down")
            self._inbox.append(request)
            self._wake.notify()
        done = False
        try:
            while not done:
                item = await request.queue.get()
                if isinstance(item, BaseException):
                    done = True
                    raise item
                done = item.finished
                yield item
        finally:
            if not done:
                with self._wake:
                    request.aborted = True
                    self._wake.notify()

    async def between_requests(self, work: Callable[[], Any]) -> Any:
        """Run `work` on the worker thread once no request is in flight (new ones wait until
        it is done), and return what it returns; a new set of weights is applied so."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        with self._wake:
            if self._closed:
                raise WorkerClosed("the engine has been shut down")
            self._between.append((work, done))
            self._wake.notify()
        return await done

    def close(self) -> None:
        """Stop the thread (after the forward in progress); requests in flight fail with
        `WorkerClosed`."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not (
                    self._closed
                    or self._inbox
                    or self.engine.has_work()
                    or any(r.aborted for r in self._live)
                    or (self._between and not self._live)
                ):
                    self._wake.wait()
                if self._closed:
                    self._fail(
                        [*self._inbox, *self._live], WorkerClosed("the engine was shut down")
                    )
                    for _, done in self._between:
                        _settle(done, WorkerClosed("the engine was shut down"))
                    self._inbox, self._between = [], []
                    return
                between: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
                arrived: list[_Request] = []
                if self._between and not self._live:
                    between, self._between = self._between, []
                elif not self._between:
                    # While work waits for the requests in flight to end, new ones wait here.
                    arrived, self._inbox = self._inbox, []
            for work, done in between:
                try:
                    _settle(done, None, work())
                except Exception as exc:
                    _settle(done, exc)
            if between:
                continue
            self._admit(arrived)
            self._drop_aborted()
            try:
                advanced = set(map(id, self.engine.step()))
            except Exception as exc:  # a failed forward fails its requests, not the worker
                self._fail(self._live, exc)
                continue
            for request in list(self._live):
                seq = request.seq
                if seq is not None and (id(seq) in advanced or seq.finished):
                    if not _post(request, Progress.of(seq)):
                        request.aborted = True  # its event loop is gone: nobody is waiting
                    elif seq.finished:
                        self._live.remove(request)

    def _admit(self, arrived: list[_Request]) -> None:
        for request in arrived:
            try:
                request.seq = self.engine.add(request.prompt, request.options)
            except Exception as exc:
                _post(request, exc)
                continue
            self._live.append(request)

    def _drop_aborted(self) -> None:
        for request in [r for r in self._live if r.aborted]:
            if request.seq is not None:
                self.engine.abort(request.seq)
            self._live.remove(request)

    def _fail(self, requests: list[_Request], exc: BaseException) -> None:
        """End `requests` with `exc`, freeing their blocks."""
        for request in list(requests):
            if not request.aborted:
                _post(request, exc)
            if request.seq is not None:
                self.engine.abort(request.seq)
        self._live = [r for r in self._live if r not in requests]


def _settle(done: asyncio.Future[Any], error: BaseException | None, value: Any = None) -> None:
    """Complete `done` from the worker thread (unless its loop is gone or it was cancelled)."""

    def settle() -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    with contextlib.suppress(RuntimeError):  # the caller's loop has closed: nobody waits
        done.get_loop().call_soon_threadsafe(settle)


def _post(request: _Request, item: Progress | BaseException) -> bool:
    """Hand `item` to the request's event loop; False when that loop is closed."""
    try:
        request.loop.call_soon_threadsafe(request.queue.put_nowait, item)
    except RuntimeError:
        return False
    return True
