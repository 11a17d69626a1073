"""The harness behind a process boundary: JSON lines over stdio.

Run `python -m opencomposer.agent.tools.rpc --workspace DIR --data-dir DIR` (for instance
inside a sandbox, or through a shell on another machine) and drive it with `RemoteHarness`,
the `Harness` a runtime uses when a rollout's tools must run elsewhere (`harness_factory`).

Requests are `{"id", "method", "params"}`, answers `{"id", "result"}` or `{"id", "error"}`;
a running call also sends `{"id", "output": {"stream", "text"}}` lines with its command's
output. Requests run concurrently, so a long command does not block a quick read, and
`cancel` stops one, answered once it has stopped (an interrupted turn kills its command
before it goes on, as in process). A
malformed line gets an error answer, never a crash.

Secrets: the server's own redactor learns what its workspace's `.env` files hold and what
its environment held (both only visible there); every line it sends carries, under
`secrets`, the values learned since its last line, and the client adds them to the thread's
redactor before it uses the line. So what the runtime stores or shows is masked as if the
tools ran in process; the values travel only over this private pipe. The server keeps its
own stdout for the pipe (a stray print goes to stderr), so nothing else can write on it.

The client never hangs on a broken server: a dead process, a malformed line or a request not
answered in time makes the harness unavailable (`HarnessUnavailable`) and the turn fails.
"""

import argparse
import asyncio
import contextlib
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opencomposer.agent.tools.checkpoints import UndoScope
from opencomposer.agent.tools.errors import (
    Conflict,
    Denied,
    InvalidArguments,
    NotFound,
    Timeout,
    ToolError,
    UnexpectedEnvironment,
    UserAborted,
)
from opencomposer.agent.tools.harness import ToolHarness, cap_text, failed_call
from opencomposer.agent.tools.harness_protocol import (
    CallOutcome,
    EditState,
    HarnessUnavailable,
    PreparedCall,
    UndoOutcome,
)
from opencomposer.agent.tools.registry import default_tools
from opencomposer.agent.tools.secret_files import call_secret_values
from opencomposer.agent.tools.terminal.jobs import OnOutput
from opencomposer.agent.tools.terminal_tools import MAX_TIMEOUT
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings
from opencomposer.redact import Redactor
from opencomposer.serving.engines.base import ToolSpec

# Seconds a request other than `run` may take: the slowest is a first secret-file walk of a
# large workspace (0.45 s for 20,000 folders) or a git status (5 s at most).
RPC_TIMEOUT = 60.0
# Seconds `close` waits for the server to stop its jobs and exit before killing it.
CLOSE_TIMEOUT = 30.0
_TOOL_ERRORS: dict[str, type[ToolError]] = {
    error.kind: error
    for error in (
        InvalidArguments,
        NotFound,
        Conflict,
        Timeout,
        Denied,
        UnexpectedEnvironment,
        UserAborted,
    )
}
Send = Callable[[dict[str, Any]], None]

# --------------------------------------------------------------------------- server


async def serve(harness: ToolHarness, reader: asyncio.StreamReader, write: Send) -> None:
    """Answer requests until stdin closes or `shutdown` arrives."""
    sent: set[str] = set()

    def send(message: dict[str, Any]) -> None:
        new = [secret for secret in harness.redactor.secrets() if secret not in sent]
        if new:
            sent.update(new)
            message["secrets"] = new
        write(message)

    running: dict[Any, asyncio.Task[None]] = {}
    while line := await reader.readline():
        try:
            request = json.loads(line)
        except ValueError as exc:
            send({"id": None, "error": {"kind": "parse_error", "message": str(exc)}})
            continue
        if (
            not isinstance(request, dict)
            or not isinstance(request.get("method"), str)
            or not isinstance(request.get("id"), int | str | None)
        ):
            rid = request.get("id") if isinstance(request, dict) else None
            send(
                {
                    "id": rid if isinstance(rid, int | str | None) else None,
                    "error": {
                        "kind": "invalid_request",
                        "message": "a request is an object with a string `method` and an "
                        "id that is a number or a string",
                    },
                }
            )
            continue
        if request["method"] == "shutdown":
            break
        if request["method"] == "cancel":
            task = running.get((request.get("params") or {}).get("id"))
            if task is not None:
                task.cancel()
            continue
        task = asyncio.create_task(_answer(harness, request, send))
        running[request.get("id")] = task
        task.add_done_callback(functools.partial(_forget, running, request.get("id")))
    if running:
        await asyncio.gather(*running.values(), return_exceptions=True)
    await harness.close()


def _forget(running: dict[Any, "asyncio.Task[None]"], rid: Any, _: object) -> None:
    running.pop(rid, None)


async def _answer(harness: ToolHarness, request: dict[str, Any], send: Send) -> None:
    rid, params = request.get("id"), request.get("params") or {}
    try:
        result = await _perform(harness, request["method"], params, rid, send)
    except asyncio.CancelledError:  # by `cancel`: the client waits to hear it is done
        send({"id": rid, "error": {"kind": "cancelled", "message": "cancelled"}})
        raise
    except ToolError as error:
        send(
            {"id": rid, "error": {"kind": error.kind, "message": error.message, "hint": error.hint}}
        )
    except KeyError as exc:
        send(
            {
                "id": rid,
                "error": {
                    "kind": "invalid_request",
                    "message": f"missing parameter {exc.args[0]!r}",
                },
            }
        )
    except (ValueError, TypeError) as exc:
        send({"id": rid, "error": {"kind": "invalid_request", "message": str(exc)}})
    else:
        send({"id": rid, "result": result})


async def _perform(
    harness: ToolHarness, method: str, params: dict[str, Any], rid: Any, send: Send
) -> Any:
    match method:
        case "hello":
            return {"specs": [spec.model_dump() for spec in harness.specs()]}
        case "prepare":
            prepared = await harness.prepare(params["name"], params.get("arguments"))
            return prepared.to_json()
        case "run":

            def output(stream: str, text: str) -> None:
                send({"id": rid, "output": {"stream": stream, "text": text}})

            outcome = await harness.run(
                PreparedCall.from_json(params["prepared"]),
                call_id=params["call_id"],
                turn_id=params.get("turn_id"),
                on_output=output,
            )
            return outcome.to_json()
        case "undo":
            undone = await harness.undo(params["scope"], params.get("turn_id"))
            return undone.to_json()
        case "edit_states":
            states = await harness.edit_states(params["turn_id"])
            return [{"path": s.path, "state": s.state} for s in states]
        case "git_summary":
            return await harness.git_summary()
        case "refresh_secrets":
            await harness.refresh_secrets()
            return None
        case other:
            raise ValueError(f"unknown method {other!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the tool harness over stdio.")
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--settings", default="{}", help="ToolSettings as JSON")
    parser.add_argument("--thread-id", default="default")
    parser.add_argument("--tools", help="comma-separated tool names (default: all)")
    options = parser.parse_args()
    settings = ToolSettings.model_validate_json(options.settings)
    tools = default_tools()
    if options.tools is not None:
        names = set(options.tools.split(","))
        tools = [tool for tool in tools if tool.name in names]
    # The pipe is this process's own: fd 1 now goes to stderr, so nothing a tool or library
    # prints can break a line of the protocol.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def write(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")

    async def run() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**26)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        harness = ToolHarness(
            Workspace(options.workspace),
            settings,
            options.data_dir,
            tools=tools,
            thread_id=options.thread_id,
        )
        await serve(harness, reader, write)

    asyncio.run(run())


# --------------------------------------------------------------------------- client


class _CallSecrets:
    """The secret watch of a remote harness: values a call's arguments will write into a
    secret file are learned here, before the call's events go out; what the files hold
    arrives with the server's answers, so a refresh has nothing to do."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor

    def refresh(self, *, force: bool = False) -> None:
        return None

    def note_call(self, arguments: Any) -> None:
        for value in call_secret_values(arguments):
            self._redactor.add(value)


@dataclass
class _Waiting:
    answer: asyncio.Future[dict[str, Any]]
    on_output: OnOutput | None


class RemoteHarness:
    """A harness in a child process, e.g. `await RemoteHarness.start(root, data, settings,
    wrap=["bwrap", ...])` to run it inside a sandbox."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        root: Path,
        settings: ToolSettings,
        redactor: Redactor,
        *,
        timeout: float = RPC_TIMEOUT,
    ) -> None:
        """`root`: the workspace as the server sees it. `start` makes one and says hello;
        a test may wrap a process of its own."""
        self.process = process
        self._root = root
        self._settings = settings
        self._redactor = redactor
        self.secret_files = _CallSecrets(redactor)
        self._timeout = timeout
        self._specs: list[ToolSpec] = []
        self._next_id = 0
        self._waiting: dict[int, _Waiting] = {}
        self._broken: str | None = None
        self._closed = False
        self._reader = asyncio.create_task(self._read_answers())

    @classmethod
    async def start(
        cls,
        workspace: Path,
        data_dir: Path,
        settings: ToolSettings,
        *,
        thread_id: str = "default",
        tools: Sequence[str] | None = None,
        redactor: Redactor | None = None,
        wrap: Sequence[str] = (),
        timeout: float = RPC_TIMEOUT,
    ) -> "RemoteHarness":
        """Start a server on `workspace` with `tools` (all by default) and say hello: its
        tool specs and the secrets it already knows arrive before anything else is asked."""
        process = await asyncio.create_subprocess_exec(
            *wrap,
            sys.executable,
            "-m",
            "opencomposer.agent.tools.rpc",
            "--workspace",
            str(workspace),
            "--data-dir",
            str(data_dir),
            "--settings",
            settings.model_dump_json(),
            "--thread-id",
            thread_id,
            *(["--tools", ",".join(tools)] if tools is not None else []),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**26,
        )
        harness = cls(process, workspace, settings, redactor or Redactor(), timeout=timeout)
        try:
            hello = await harness._request("hello", {})
        except BaseException:
            await harness.close()
            raise
        harness._specs = [ToolSpec.model_validate(spec) for spec in hello["specs"]]
        return harness

    # ------------------------------------------------------------------ Harness

    @property
    def root(self) -> Path:
        return self._root

    @property
    def settings(self) -> ToolSettings:
        return self._settings

    @property
    def redactor(self) -> Redactor:
        return self._redactor

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    async def prepare(self, name: str, arguments: dict[str, Any] | str | None) -> PreparedCall:
        data = await self._request("prepare", {"name": name, "arguments": arguments})
        return PreparedCall.from_json(data)

    async def run(
        self,
        prepared: PreparedCall,
        *,
        call_id: str,
        turn_id: str | None = None,
        on_output: OnOutput | None = None,
    ) -> CallOutcome:
        params = {"prepared": prepared.to_json(), "call_id": call_id, "turn_id": turn_id}
        # A call may legitimately wait as long as a tool's longest timeout argument.
        data = await self._request(
            "run", params, on_output=on_output, timeout=MAX_TIMEOUT + self._timeout
        )
        return CallOutcome.from_json(data)

    def failure(
        self,
        call_id: str,
        name: str,
        error: ToolError,
        prepared: PreparedCall | None = None,
        duration_ms: int = 0,
    ) -> CallOutcome:
        return failed_call(call_id, name, error, self._for_model, prepared, duration_ms)

    async def undo(self, scope: UndoScope = "edit", turn_id: str | None = None) -> UndoOutcome:
        data = await self._request("undo", {"scope": scope, "turn_id": turn_id})
        return UndoOutcome.from_json(data)

    async def edit_states(self, turn_id: str) -> list[EditState]:
        data = await self._request("edit_states", {"turn_id": turn_id})
        return [EditState(state["path"], state["state"]) for state in data]

    async def git_summary(self) -> str | None:
        summary: str | None = await self._request("git_summary", {})
        return summary

    async def refresh_secrets(self) -> None:
        await self._request("refresh_secrets", {})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        process = self.process
        if process.returncode is None and self._broken is None:
            assert process.stdin is not None
            try:
                process.stdin.write(b'{"method": "shutdown"}\n')
                process.stdin.close()
                await asyncio.wait_for(process.wait(), CLOSE_TIMEOUT)
            except (ConnectionError, TimeoutError):
                self._break("the harness process did not stop when asked")
        await process.wait()
        await self._reader

    # ------------------------------------------------------------------ the pipe

    def _for_model(self, text: str) -> str:
        return cap_text(self._redactor.redact(text), self._settings.output_cap)

    async def _request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        on_output: OnOutput | None = None,
        timeout: float | None = None,
    ) -> Any:
        """The result of one request; a ToolError the server raised is raised here, and a
        server that cannot answer makes the harness unavailable."""
        if self._broken is not None:
            raise HarnessUnavailable(self._broken)
        self._next_id += 1
        rid = self._next_id
        waiting = _Waiting(asyncio.get_running_loop().create_future(), on_output)
        self._waiting[rid] = waiting
        limit = timeout or self._timeout
        stdin = self.process.stdin
        assert stdin is not None
        try:
            async with asyncio.timeout(limit):
                stdin.write(json.dumps({"id": rid, "method": method, "params": params}).encode())
                stdin.write(b"\n")
                await stdin.drain()
                # Shielded: a cancelled request still hears the server say it has stopped.
                answer = await asyncio.shield(waiting.answer)
        except TimeoutError:
            self._break(f"the harness process did not answer {method} within {limit:g} s")
            raise HarnessUnavailable(self._broken or "") from None
        except ConnectionError:
            self._break("the harness process exited")
            raise HarnessUnavailable(self._broken or "") from None
        except asyncio.CancelledError:
            await self._cancel(rid, waiting)
            raise
        finally:
            self._waiting.pop(rid, None)
        if "error" not in answer:
            return answer.get("result")
        error = answer["error"]
        kind = _TOOL_ERRORS.get(error.get("kind"))
        if kind is None:
            raise HarnessUnavailable(
                f"the harness process refused {method}: {error.get('message')}"
            )
        raise kind(str(error.get("message")), hint=error.get("hint"))

    async def _cancel(self, rid: int, waiting: _Waiting) -> None:
        """Ask the server to stop request `rid` and wait until it has: a command the call
        started is killed before the cancellation goes on, as in process."""
        stdin = self.process.stdin
        if self._broken is not None or stdin is None or stdin.is_closing():
            return
        stdin.write(json.dumps({"method": "cancel", "params": {"id": rid}}).encode() + b"\n")
        with contextlib.suppress(Exception):  # it broke or went silent: nothing left to stop
            await asyncio.wait_for(asyncio.shield(waiting.answer), self._timeout)

    async def _read_answers(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            async for line in stdout:
                answer = _parse_answer(line)
                if answer is None:
                    self._break(f"the harness process sent a malformed line: {line[:200]!r}")
                    return
                for secret in answer.get("secrets", ()):
                    self._redactor.add(secret)
                waiting = self._waiting.get(answer["id"])
                if waiting is None:  # a request given up on (cancelled, timed out)
                    continue
                if "output" in answer:
                    if waiting.on_output is not None:
                        waiting.on_output(answer["output"]["stream"], answer["output"]["text"])
                elif not waiting.answer.done():
                    waiting.answer.set_result(answer)
        except ValueError:  # a line longer than the reader's limit
            self._break("the harness process sent a line too long to read")
            return
        code = await self.process.wait()
        self._break(f"the harness process exited (code {code})")

    def _break(self, reason: str) -> None:
        """Nothing more can be asked: every waiting request fails with `reason`, and the
        process, which no longer speaks the protocol, is stopped."""
        if self._broken is None:
            self._broken = reason
        for waiting in self._waiting.values():
            if not waiting.answer.done():
                waiting.answer.set_exception(HarnessUnavailable(reason))
        if self.process.returncode is None:
            self.process.kill()


def _parse_answer(line: bytes) -> dict[str, Any] | None:
    """An answer line as the protocol has it, or None for anything else."""
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("id", ""), int | None):
        return None
    secrets = answer.get("secrets", [])
    if not isinstance(secrets, list) or not all(isinstance(s, str) for s in secrets):
        return None
    output = answer.get("output")
    if output is not None and not (
        isinstance(output, dict)
        and isinstance(output.get("stream"), str)
        and isinstance(output.get("text"), str)
    ):
        return None
    if (
        "output" not in answer
        and "result" not in answer
        and not isinstance(answer.get("error"), dict)
    ):
        return None
    return answer


def remote_harness_factory(
    data_dir: Path, settings: ToolSettings, *, wrap: Sequence[str] = ()
) -> Callable[[Path, str, Sequence[str], Redactor], Awaitable[RemoteHarness]]:
    """A runtime's `harness_factory` that runs each thread's tools in a server process of its
    own (inside `wrap`, e.g. a sandbox), its data under `data_dir`."""

    async def start(
        workspace: Path, thread_id: str, tools: Sequence[str], redactor: Redactor
    ) -> RemoteHarness:
        return await RemoteHarness.start(
            workspace,
            data_dir,
            settings,
            thread_id=thread_id,
            tools=tools,
            redactor=redactor,
            wrap=wrap,
        )

    return start


if __name__ == "__main__":
    main()
