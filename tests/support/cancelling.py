"""Cancelling a consumer mid-stream, as a client that goes away does."""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

import pytest


async def cancel_after_first_event(
    open_stream: Callable[[], AsyncIterator], *, timeout: float = 30
) -> None:
    """Consume `open_stream()` in a task, cancel the task once an event has arrived, and check
    the cancellation reaches the consumer (the stream is closed on the way out)."""
    first = asyncio.Event()

    async def consume() -> None:
        async with aclosing(open_stream()) as stream:
            async for _ in stream:
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), timeout)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
