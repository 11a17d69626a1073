"""The harness behind a process boundary: JSON lines over stdio.

Run `python -m opencomposer.agent.tools.rpc --workspace DIR --data-dir DIR` (for instance
inside a sandbox or on another machine's shell) and drive it with `RemoteHarness`, which has
the calling surface of `ToolHarness` and returns the same outcomes. Requests are
`{"id", "method", "params"}`, answers `{"id", "result"}` or `{"id", "error"}`; requests run
concurrently, so a long command does not block a quick read. A malformed line gets an error
answer, never a crash.
"""

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opencomposer.agent.protocol.common import ErrorInfo
from opencomposer.agent.tools.errors import ToolError, UnexpectedEnvironment
from opencomposer.agent.tools.harness import CallOutcome, ToolHarness
from opencomposer.agent.tools.workspace import Workspace
from opencomposer.config import ToolSettings
from opencomposer.serving.engines.base import ToolSpec

# --------------------------------------------------------------------------- server


async def serve(harness: ToolHarness, reader: asyncio.StreamReader, write) -> None:
    """Answer requests until stdin closes or `shutdown` arrives."""
    pending: set[asyncio.Task] = set()
    while line := await reader.readline():
        try:
            request = json.loads(line)
        except ValueError as exc:
            write({"id": None, "error": {"kind": "parse_error", "message": str(exc)}})
            continue
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            rid = request.get("id") if isinstance(request, dict) else None
            write(
                {
                    "id": rid,
                    "error": {
                        "kind": "invalid_request",
                        "message": "a request is an object with a string `method`",
                    },
                }
            )
            continue
        if request["method"] == "shutdown":
            break
        task = asyncio.create_task(_answer(harness, request, write))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
    await harness.close()


async def _answer(harness: ToolHarness, request: dict[str, Any], write) -> None:
    rid, params = request.get("id"), request.get("params") or {}
    try:
        match request["method"]:
            case "specs":
                result: Any = [spec.model_dump() for spec in harness.specs()]
            case "call":
                outcome = await harness.call(
                    params["name"],
                    params.get("arguments"),
                    call_id=params.get("call_id"),
                    turn_id=params.get("turn_id"),
                )
                result = outcome.to_json()
            case "prepare":
                prepared = harness.prepare(params["name"], params.get("arguments"))
                result = {"action_class": prepared.action_class, "summary": prepared.summary}
            case other:
                raise ValueError(f"unknown method {other!r}")
    except ToolError as error:
        write({"id": rid, "error": error.info().model_dump()})
    except KeyError as exc:
        write(
            {
                "id": rid,
                "error": {
                    "kind": "invalid_request",
                    "message": f"missing parameter {exc.args[0]!r}",
                },
            }
        )
    except (ValueError, TypeError) as exc:
        write({"id": rid, "error": {"kind": "invalid_request", "message": str(exc)}})
    else:
        write({"id": rid, "result": result})


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the tool harness over stdio.")
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--settings", default="{}", help="ToolSettings as JSON")
    parser.add_argument("--thread-id", default="default")
    options = parser.parse_args()
    settings = ToolSettings.model_validate_json(options.settings)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**26)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        out = os.fdopen(sys.stdout.fileno(), "wb", buffering=0)

        def write(message: dict[str, Any]) -> None:
            out.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")

        harness = ToolHarness(
            Workspace(options.workspace), settings, options.data_dir, thread_id=options.thread_id
        )
        await serve(harness, reader, write)

    asyncio.run(run())


# --------------------------------------------------------------------------- client


class RemoteHarness:
    """A harness in a child process, e.g. `RemoteHarness.start(root, data, settings,
    wrap=["bwrap", ...])` to run it inside a sandbox."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future] = {}
        self._reader = asyncio.create_task(self._read_answers())

    @classmethod
    async def start(
        cls,
        workspace: Path,
        data_dir: Path,
        settings: ToolSettings,
        *,
        thread_id: str = "default",
        wrap: Sequence[str] = (),
    ) -> "RemoteHarness":
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
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**26,
        )
        return cls(process)

    async def specs(self) -> list[ToolSpec]:
        return [ToolSpec.model_validate(s) for s in await self._request("specs", {})]

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | str | None,
        *,
        call_id: str | None = None,
        turn_id: str | None = None,
    ) -> CallOutcome:
        data = await self._request(
            "call", {"name": name, "arguments": arguments, "call_id": call_id, "turn_id": turn_id}
        )
        error = data.pop("error")
        return CallOutcome(**data, error=ErrorInfo.model_validate(error) if error else None)

    async def close(self) -> None:
        if self._process.returncode is None:
            assert self._process.stdin is not None
            self._process.stdin.write(b'{"method": "shutdown"}\n')
            self._process.stdin.close()
            await self._process.wait()
        await self._reader

    async def _request(self, method: str, params: dict[str, Any]) -> Any:
        if self._process.returncode is not None:
            raise UnexpectedEnvironment("the harness process has exited")
        self._next_id += 1
        future = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = future
        message = {"id": self._next_id, "method": method, "params": params}
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message).encode() + b"\n")
        await self._process.stdin.drain()
        answer = await future
        if "error" in answer:
            raise UnexpectedEnvironment(f"harness process: {answer['error']['message']}")
        return answer["result"]

    async def _read_answers(self) -> None:
        assert self._process.stdout is not None
        async for line in self._process.stdout:
            answer = json.loads(line)
            future = self._waiting.pop(answer.get("id"), None)
            if future is not None and not future.done():
                future.set_result(answer)
        for future in self._waiting.values():  # the process died with calls in flight
            if not future.done():
                future.set_exception(UnexpectedEnvironment("the harness process exited"))


if __name__ == "__main__":
    main()
