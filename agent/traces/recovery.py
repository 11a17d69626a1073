"""Turns whose process died: found and closed as soon as any trace store opens the file.

A turn that was running when its process was killed stays `in_progress` in the log until
someone says otherwise; every reader (a server starting, `traces list`, an export) would show
it running forever. Each store therefore claims the turns it starts: it holds an exclusive
`flock` on a lock file of its own for as long as it is open, and a `turn_owners` row names
that lock for every running turn. When a store opens, a running turn whose owner's lock
can be taken (the kernel drops a dead process's locks) is closed: its open items end
`interrupted` with what they had streamed, and the turn ends `interrupted` with the tokens
and model calls that were recorded for it. Several processes may share one trace database
(an editor's language server and an HTTP server): a live owner's turns are left alone.
"""

import contextlib
import fcntl
import itertools
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opencomposer.agent.protocol.common import ErrorInfo, TokenUsage, utc_now
from opencomposer.agent.protocol.events import Event, ItemCompletedEvent, TurnCompletedEvent
from opencomposer.agent.protocol.items import Item, ItemStatus, ToolCallFields
from opencomposer.agent.protocol.threads import StopReason, Turn, TurnStatus

INTERRUPTED_NOTE = "\n[interrupted: the server stopped]"
SERVER_STOPPED = ErrorInfo(
    kind="server_stopped", message="the server stopped while this turn was running"
)


class OwnerLock:
    """This store's claim on its turns: an exclusive flock on `<folder>/<id>.lock`, held
    until `close()` or the process's death. The file is locked under a temporary name and
    then renamed into place, so the final name never refers to an unlocked file (another
    store probing in between would take it for a dead owner's)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.id = uuid.uuid4().hex
        self.path = folder / f"{self.id}.lock"
        staging = folder / f".{self.id}.lock.new"
        self._fd = os.open(staging, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(self._fd, f"{os.getpid()}\n".encode())
            os.rename(staging, self.path)
        except BaseException:
            os.close(self._fd)
            staging.unlink(missing_ok=True)
            raise

    def close(self) -> None:
        if self._fd >= 0:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = -1


def owner_alive(folder: Path, owner: str | None) -> bool:
    """Whether the store that claimed a turn still holds its lock. No owner (a turn written
    before owners were recorded) or no lock file means nobody is running it."""
    if not owner:
        return False
    path = folder / f"{owner}.lock"
    try:
        if _locked(path):
            return True
    except FileNotFoundError:
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead owner's file: nothing will ever release it now
    return False


def sweep_dead_owners(folder: Path) -> None:
    """Remove the lock files nobody holds: stores that died with no turn running (nothing
    else would ever look at their files). A staging file is left for a minute, so one being
    locked by a store that is opening right now is not taken from under it."""
    for path in folder.iterdir():
        with contextlib.suppress(OSError):
            if path.name.startswith(".") and time.time() - path.stat().st_mtime < 60:
                continue
            if not _locked(path):
                path.unlink()


def _locked(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def recorded_usage(calls: Iterable[dict[str, Any] | None]) -> TokenUsage:
    """What the model calls recorded for a turn add up to (their stored responses)."""
    usage = TokenUsage()
    for response in calls:
        if response is None:
            continue
        counts = response.get("usage") or {}
        usage = TokenUsage(
            prompt_tokens=usage.prompt_tokens + counts.get("prompt_tokens", 0),
            completion_tokens=usage.completion_tokens + counts.get("completion_tokens", 0),
            cached_prompt_tokens=usage.cached_prompt_tokens + counts.get("cached_tokens", 0),
            model_calls=usage.model_calls + 1,
        )
    return usage


def closing_events(
    turn: Turn, open_items: list[Item], streamed: dict[str, str], usage: TokenUsage, first_seq: int
) -> list[Event]:
    """The events that end an abandoned turn, numbered from `first_seq`: each open item
    completed `interrupted`, keeping the text it had streamed, then the turn itself."""
    next_seq = itertools.count(first_seq).__next__
    now = utc_now()
    events: list[Event] = []
    for item in open_items:
        text = streamed.get(item.id, "")
        changes: dict[str, Any] = {"status": ItemStatus.interrupted, "completed_at": now}
        if isinstance(item, ToolCallFields):
            changes["output"] = text + INTERRUPTED_NOTE
        elif hasattr(item, "text"):
            changes["text"] = text
        final = type(item).model_validate({**item.model_dump(), **changes})
        events.append(ItemCompletedEvent(seq=next_seq(), thread_id=turn.thread_id, item=final))
    ended = turn.model_copy(
        update={
            "status": TurnStatus.interrupted,
            "stop_reason": StopReason.interrupted,
            "error": SERVER_STOPPED,
            "usage": usage,
            "completed_at": now,
        }
    )
    events.append(TurnCompletedEvent(seq=next_seq(), thread_id=turn.thread_id, turn=ended))
    return events
