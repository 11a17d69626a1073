"""The bench's upper bound through the agent's own path: an engine that "solves" each task by
calling the agent's tools with what the task's oracle does (write_file for each file the
solution ships, run_terminal for the rest of solve.sh), then says it is done.

`bench run --oracle` checks the tasks (the solution run directly); this checks the harness:
a task the oracle agent fails is one the real model could not pass either, whatever it did
(a tool that mangles a file, a verifier that cannot see the edit, a budget too small to finish).
It is not a model: it reports no tokens.

Which task a request belongs to comes from the workspace the system prompt names (the runner
puts each trial's workspace at RUN/TASK/attempt-N/workspace), so trials running at once never
take each other's steps.
"""

import base64
import json
import re
import shlex
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

from opencomposer.serving.engines.base import (
    EngineEvent,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    ToolCall,
    Usage,
    Weights,
)
from opencomposer.serving.engines.errors import EngineRequestError
from opencomposer.serving.engines.replay import stream_events
from opencomposer.training.eval.task import Task

MODEL_ID = "oracle-agent"
_WORKSPACE = re.compile(r"^- Workspace root[^:]*: (?P<path>.+)$", re.MULTILINE)
_COPY_FILES = re.compile(r"^\s*cp -r /solution/files/\. /app/?\s*$", re.MULTILINE)
_APP = re.compile(r"(?<![\w/.])/app(?=/|\b|$)")
_TRIVIAL = re.compile(r"^\s*(#.*|set -[a-z]+( pipefail)?|cd \.)?\s*$")

Step = tuple[str, dict[str, Any]]


def oracle_steps(task: Task) -> list[Step]:
    """The tool calls that do what the task's solve.sh does, from the workspace root."""
    steps: list[Step] = []
    script = (task.solution_dir / "solve.sh").read_text(encoding="utf-8")
    files = task.solution_dir / "files"
    copied = files.is_dir() and _COPY_FILES.search(script) is not None
    for path in sorted(p for p in files.rglob("*") if p.is_file()) if copied else []:
        relative = path.relative_to(files).as_posix()
        data = path.read_bytes()
        try:
            steps.append(
                ("write_file", {"path": relative, "content": data.decode(), "overwrite": True})
            )
        except UnicodeDecodeError:
            encoded = base64.b64encode(data).decode()
            target = shlex.quote(relative)
            command = (
                f"mkdir -p \"$(dirname {target})\" && base64 -d > {target} <<'B64'\n{encoded}\nB64"
            )
            steps.append(("run_terminal", {"command": command}))
    rest = _APP.sub(".", _COPY_FILES.sub("", script))
    if any(not _TRIVIAL.match(line) for line in rest.splitlines()):
        body = rest if rest.startswith("#!") else "#!/bin/bash\n" + rest
        steps.append(
            (
                "run_terminal",
                {
                    "command": f"bash <<'OPENCOMPOSER_ORACLE'\n{body}\nOPENCOMPOSER_ORACLE",
                    "timeout": 600,
                },
            )
        )
    return steps


class OracleEngine:
    name = "oracle-agent"

    def __init__(self, tasks: Sequence[Task]) -> None:
        self.steps = {task.name: oracle_steps(task) for task in tasks}

    async def models(self) -> list[ModelInfo]:
        return [ModelInfo(id=MODEL_ID, context_window=131_072)]

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        steps = self.steps.get(self._task_of(request) or "", [])
        done = sum(message.role == "assistant" for message in request.messages)
        if done < len(steps):
            name, arguments = steps[done]
            call = ToolCall(id=f"oracle_{done}", name=name, arguments=json.dumps(arguments))
            result = GenerationResult(tool_calls=[call], finish_reason="tool_calls")
        elif steps:
            result = GenerationResult(
                text="Applied the task's reference solution.", finish_reason="stop"
            )
        else:
            result = GenerationResult(
                text="Not a bench trial I know: no workspace of one in the system prompt.",
                finish_reason="stop",
            )
        result.usage = Usage(0, 0)
        for event in stream_events(result):
            yield event

    def _task_of(self, request: GenerationRequest) -> str | None:
        for message in request.messages:
            if message.role == "system":
                found = _WORKSPACE.search(str(message.content))
                if found:
                    return Path(found["path"].strip()).parent.parent.name
        return None

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        raise EngineRequestError("the oracle agent is not a model: it has no weights to update")

    async def aclose(self) -> None:
        return None
