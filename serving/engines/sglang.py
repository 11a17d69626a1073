"""The `sglang` backend: launch SGLang's server for a checkpoint and serve through it.

SGLang is the production engine for DeepSeek-V3 and Kimi K2 (MLA, expert parallelism,
speculative decoding), but it cannot be a dependency of this package: it pins its own CUDA
torch. So it runs as a child process, `python -m sglang.launch_server`, and requests go over
its OpenAI-compatible API through `OpenAIEngine` with `server_flavor="sglang"`, which lets
token ids, routed experts and speculative-decoding stats be captured for training.

The flags are derived from the checkpoint's config.json, because the right ones differ by
family and mistakes show up late (after minutes of weight loading) or silently (tool calls
left as text, answers filed as reasoning):
- DeepSeek-V3/R1 carry one MTP (NextN) layer, which SGLang drafts with through its EAGLE
  worker and no separate draft model. Kimi K2/K2.5 ship no MTP weights, so they speculate
  only with an external EAGLE-3 draft.
- Tool-call and reasoning parsers depend on family and version.

The server forks scheduler and detokenizer processes that hold the GPUs, so it runs in its
own process group and is stopped as a group (SIGTERM, then SIGKILL after a grace period) on
`aclose`, on garbage collection and at interpreter exit: no orphan keeps the GPUs.
"""

import asyncio
import difflib
import json
import logging
import os
import re
import shlex
import signal
import socket
import sys
import time
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import httpx
from pydantic import ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import EngineEvent, GenerationRequest, ModelInfo, Weights
from opencomposer.serving.engines.errors import (
    EngineError,
    EngineRequestError,
    EngineTimeout,
    EngineUnavailable,
)
from opencomposer.serving.engines.openai import OpenAIEngine

log = logging.getLogger(__name__)
server_log = log.getChild("server")
"""Where the server's own output goes, line by line."""

SGLANG_SERVER = (sys.executable, "-m", "sglang.launch_server")
_TAIL_LINES = 40
_POLL_INTERVAL = 0.25

Positive = Annotated[int, Field(ge=1)]


class SGLangLaunchError(EngineError):
    """Launch options that cannot work (a bad spec string, an invalid combination)."""

    kind = "engine_config"


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class SGLangLaunch:
    """How to launch the server. Parsers left unset are chosen from the checkpoint; `none`
    turns one off. Port 0 picks a free port at launch."""

    model_path: str
    host: str = "127.0.0.1"
    """Loopback by default: the server has no authentication of its own."""
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    tp: Positive = 1
    dp: Positive = 1
    ep: Positive = 1
    enable_dp_attention: bool = False
    speculative: Literal["auto", "none", "mtp", "eagle3"] = "auto"
    """`auto`: EAGLE-3 when a draft is given, else the checkpoint's MTP layer if it has one."""
    draft_model_path: str | None = None
    num_steps: Positive = 3
    topk: Positive = 1
    num_draft_tokens: Positive = 4
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    mem_fraction_static: Annotated[float, Field(gt=0, lt=1)] | None = None
    context_length: Positive | None = None
    served_model_name: str | None = None
    extra_args: tuple[str, ...] = ()
    startup_timeout: Annotated[float, Field(gt=0)] = 1800.0
    """Seconds to wait for health; loading a 671B checkpoint takes many minutes."""
    stop_grace: Annotated[float, Field(gt=0)] = 30.0


_SPEC_ALIASES = {
    "spec": "speculative",
    "draft": "draft_model_path",
    "dp_attention": "enable_dp_attention",
    "mem": "mem_fraction_static",
    "context": "context_length",
    "name": "served_model_name",
    "arg": "extra_args",
}


def launch_from_spec(spec: str) -> SGLangLaunch:
    """Parse `sglang:MODEL_PATH[,key=value...]`, e.g. `sglang:/models/dsv3,tp=8,spec=mtp`.

    Keys are `SGLangLaunch` field names or the aliases in `_SPEC_ALIASES`; `arg=` may repeat,
    each adding one extra command-line token."""
    scheme, colon, rest = spec.partition(":")
    path, *pairs = rest.split(",")
    if scheme != "sglang" or not colon or not path.strip():
        raise SGLangLaunchError(f"expected sglang:MODEL_PATH[,key=value...], got {spec!r}")
    keys = sorted({f.name for f in fields(SGLangLaunch)} - {"model_path"} | set(_SPEC_ALIASES))
    values: dict[str, Any] = {"model_path": path.strip()}
    extra: list[str] = []
    for pair in pairs:
        key, equals, value = (part.strip() for part in pair.partition("="))
        name = _SPEC_ALIASES.get(key, key)
        if not equals:
            raise SGLangLaunchError(f"{spec!r}: expected key=value, got {pair!r}")
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(keys)}"
            raise SGLangLaunchError(f"{spec!r}: unknown key {key!r} ({hint})")
        if name == "extra_args":
            extra.append(value)
        elif name in values:
            raise SGLangLaunchError(f"{spec!r}: {key} is given twice")
        else:
            values[name] = value
    try:
        launch = SGLangLaunch(**values, extra_args=tuple(extra))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}={e['input']!r}: {e['msg']}" for e in exc.errors()
        )
        raise SGLangLaunchError(f"{spec!r}: {problems}") from None
    _check_options(launch)
    return launch


def read_model_config(model_path: str) -> dict[str, Any]:
    """The checkpoint's config.json. A hub id (which SGLang downloads itself) gives `{}`,
    so nothing model-specific is chosen for it."""
    folder = Path(model_path).expanduser()
    if not folder.is_dir():
        if model_path.startswith(("/", ".", "~")):
            raise SGLangLaunchError(f"no checkpoint folder at {model_path}")
        log.warning("%s is not a local folder; launching without model-specific flags", model_path)
        return {}
    file = folder / "config.json"
    try:
        config = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise SGLangLaunchError(f"{file}: cannot read it as JSON: {exc}") from None
    if not isinstance(config, dict):
        raise SGLangLaunchError(f"{file}: not a JSON object")
    return config


class _Family(NamedTuple):
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    trust_remote_code: bool = False


def _family(config: dict[str, Any], path: str) -> _Family:
    """Parsers for the checkpoint. Kimi K2 reuses DeepSeek-V3's architecture, so it is told
    apart by name first. DeepSeek versions share one config shape and differ by name:
    `deepseek-r1` assumes output starts inside reasoning, which would file every answer of
    non-thinking V3 as reasoning, so V3 gets no reasoning parser and the hybrid-thinking
    V3.1/V3.2 get `deepseek-v3`."""
    text = config.get("text_config") or {}
    names = [config.get("model_type"), text.get("model_type"), config.get("_name_or_path"), path]
    names += [*(config.get("architectures") or ()), *(text.get("architectures") or ())]
    identity = " ".join(str(name) for name in names if name).lower()
    if "kimi" in identity:
        return _Family("kimi_k2", "kimi_k2", trust_remote_code=True)
    if "deepseek" not in identity:
        return _Family()
    if re.search(r"(?<![a-z0-9])r1(?![0-9])", identity):
        return _Family("deepseekv3", "deepseek-r1")
    if re.search(r"v3[._-]?2(?![0-9])", identity):
        return _Family("deepseekv32", "deepseek-v3")
    if re.search(r"v3[._-]?1(?![0-9])", identity):
        return _Family("deepseekv31", "deepseek-v3")
    return _Family("deepseekv3")


def _nextn_layers(config: dict[str, Any]) -> int:
    text = config.get("text_config") or {}
    return int(config.get("num_nextn_predict_layers") or text.get("num_nextn_predict_layers") or 0)


def _check_options(launch: SGLangLaunch) -> None:
    """Combinations that are wrong whatever the checkpoint."""
    if launch.speculative == "eagle3" and not launch.draft_model_path:
        raise SGLangLaunchError("speculative=eagle3 needs draft_model_path (an EAGLE-3 draft)")
    if launch.draft_model_path and launch.speculative in ("mtp", "none"):
        raise SGLangLaunchError(
            f"draft_model_path is only used by speculative=eagle3, not {launch.speculative} "
            "(mtp drafts with the checkpoint's own NextN layer)"
        )
    if launch.enable_dp_attention and (launch.dp < 2 or launch.tp % launch.dp):
        raise SGLangLaunchError(
            f"enable_dp_attention needs dp >= 2 dividing tp (got tp={launch.tp}, dp={launch.dp})"
        )


def _speculation(launch: SGLangLaunch, config: dict[str, Any]) -> str | None:
    """SGLang's --speculative-algorithm for the launch, or None."""
    mode, has_mtp = launch.speculative, _nextn_layers(config) >= 1
    if mode == "auto":
        mode = "eagle3" if launch.draft_model_path else "mtp" if has_mtp else "none"
        if mode == "none":
            log.warning(
                "speculative decoding is off: %s has no MTP layer and no EAGLE-3 draft was "
                "given (set draft_model_path)",
                launch.model_path,
            )
    if mode == "mtp" and not has_mtp:
        raise SGLangLaunchError(
            f"speculative=mtp needs a checkpoint with an MTP (NextN) layer, and "
            f"{launch.model_path} has none (num_nextn_predict_layers = 0; Kimi K2 ships no MTP "
            "weights): use speculative=eagle3 with an EAGLE-3 draft_model_path"
        )
    return {"none": None, "mtp": "EAGLE", "eagle3": "EAGLE3"}[mode]


def build_command(
    launch: SGLangLaunch, model_config: dict[str, Any], *, prefix: Sequence[str] = SGLANG_SERVER
) -> list[str]:
    """The server's command line for a launch and the checkpoint's config.json."""
    _check_options(launch)
    family = _family(model_config, launch.model_path)
    algorithm = _speculation(launch, model_config)
    command = [*prefix, "--model-path", launch.model_path, "--host", launch.host]
    command += ["--port", str(launch.port), "--tp-size", str(launch.tp)]
    if launch.served_model_name:
        command += ["--served-model-name", launch.served_model_name]
    if launch.dp > 1:
        command += ["--dp-size", str(launch.dp)]
    if launch.ep > 1:
        command += ["--ep-size", str(launch.ep)]
    if launch.enable_dp_attention:
        command.append("--enable-dp-attention")
    if family.trust_remote_code:
        command.append("--trust-remote-code")
    for flag, parser in (
        ("--tool-call-parser", launch.tool_call_parser or family.tool_call_parser),
        ("--reasoning-parser", launch.reasoning_parser or family.reasoning_parser),
    ):
        if parser and parser != "none":
            command += [flag, parser]
    if algorithm:
        command += ["--speculative-algorithm", algorithm]
        if algorithm == "EAGLE3":
            command += ["--speculative-draft-model-path", str(launch.draft_model_path)]
        command += ["--speculative-num-steps", str(launch.num_steps)]
        command += ["--speculative-eagle-topk", str(launch.topk)]
        command += ["--speculative-num-draft-tokens", str(launch.num_draft_tokens)]
    if launch.mem_fraction_static is not None:
        command += ["--mem-fraction-static", str(launch.mem_fraction_static)]
    if launch.context_length is not None:
        command += ["--context-length", str(launch.context_length)]
    return [*command, *launch.extra_args]


class _Server(NamedTuple):
    proc: asyncio.subprocess.Process
    logs: asyncio.Task[None]
    """Reads the output pipe; it ends once every process that inherited the pipe is gone."""
    finalizer: weakref.finalize


class SGLangEngine:
    """Engine owning an SGLang server: launched on first use (and again if it died), stopped
    on `aclose`. `command_prefix` replaces `python -m sglang.launch_server`, so tests can run
    a fake server through the same launch path."""

    def __init__(
        self,
        settings: EngineSettings,
        launch: SGLangLaunch,
        *,
        command_prefix: Sequence[str] = SGLANG_SERVER,
    ) -> None:
        self._settings = settings
        self._launch = replace(launch, served_model_name=launch.served_model_name or settings.model)
        self._prefix = tuple(command_prefix)
        self._starting: asyncio.Task[OpenAIEngine] | None = None
        self._server: _Server | None = None
        self._client: OpenAIEngine | None = None
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)

    @property
    def launch(self) -> SGLangLaunch:
        """What the server is (or will be) launched with."""
        return self._launch

    async def models(self) -> list[ModelInfo]:
        return await (await self._started()).models()

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        client = await self._started()
        async with aclosing(client.generate(request)) as stream:
            async for event in stream:
                yield event

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        raise EngineRequestError(
            "the sglang backend does not take weights yet: relaunch it on the new checkpoint "
            "(SGLang's update_weights_from_disk is the planned path)"
        )

    async def aclose(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.cancel()  # stops a launch still in progress; no-op when done
            await asyncio.wait({starting})
        await self._shutdown()

    async def _started(self) -> OpenAIEngine:
        """The client of a running server. The launch runs as its own task, shielded from
        callers: a cancelled first request must not kill a server that has been loading
        weights for minutes, and concurrent first requests share one launch."""
        server = self._server
        if self._client is not None and server is not None and server.proc.returncode is None:
            return self._client
        if self._starting is None or self._starting.done():
            self._starting = asyncio.create_task(self._start())
        return await asyncio.shield(self._starting)

    async def _start(self) -> OpenAIEngine:
        if self._server is not None:  # it died after it was ready
            code = self._server.proc.returncode
            log.warning("the SGLang server exited (code %s); relaunching", code)
            await self._shutdown()
        launch = self._launch
        if launch.port == 0:
            launch = replace(launch, port=_free_port(launch.host))
        command = build_command(launch, read_model_config(launch.model_path), prefix=self._prefix)
        log.info("launching SGLang: %s", shlex.join(command))
        self._tail.clear()
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as a whole
                limit=2**20,
            )
        except OSError as exc:
            raise EngineUnavailable(f"cannot start {command[0]}: {exc}") from None
        assert proc.stdout is not None
        self._server = _Server(
            proc,
            asyncio.create_task(_forward_logs(proc.stdout, self._tail)),
            weakref.finalize(self, _terminate_group, proc.pid, launch.stop_grace),
        )
        root = f"http://{_url_host(launch.host)}:{launch.port}"
        try:
            ready = await _wait_ready(proc, root, launch.startup_timeout)
        except BaseException:
            await self._stop()
            raise
        if not ready:
            code = proc.returncode
            await self._stop()  # also drains the output, so the tail has its last words
            tail = "\n".join(self._tail) or "(no output)"
            if code is not None:
                raise EngineUnavailable(
                    f"the SGLang server exited with code {code} while starting; its last "
                    f"output:\n{tail}"
                )
            raise EngineTimeout(
                f"the SGLang server was not ready after {launch.startup_timeout:g}s (raise "
                f"startup_timeout for large checkpoints); its last output:\n{tail}"
            )
        log.info("SGLang server ready at %s (pid %d)", root, proc.pid)
        update = {"base_url": f"{root}/v1", "server_flavor": "sglang"}
        self._client = OpenAIEngine(self._settings.model_copy(update=update))
        return self._client

    async def _shutdown(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        await self._stop()

    async def _stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        await _terminate(server, self._launch.stop_grace)
        server.finalizer.detach()
        server.logs.cancel()  # in case a process outside the group still holds the pipe


async def _wait_ready(proc: asyncio.subprocess.Process, root: str, timeout: float) -> bool:
    """Poll until /health and /v1/models answer 200: True, or False once the process exits
    or the time is up. /health alone can pass before the model is registered."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient(timeout=5.0, trust_env=False) as http:
        while proc.returncode is None and loop.time() < deadline:
            if await _answers(http, f"{root}/health") and await _answers(http, f"{root}/v1/models"):
                return True
            await asyncio.sleep(_POLL_INTERVAL)
    return False


async def _answers(http: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await http.get(url)).status_code == 200
    except httpx.HTTPError:
        return False


async def _forward_logs(stream: asyncio.StreamReader, tail: deque[str]) -> None:
    """Copy the server's output to our logger, keeping the last lines for error messages.
    A module function, not a method, so the running task does not keep the engine alive."""
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # a line over the limit; the reader has dropped it
            server_log.warning("(an over-long line of server output was dropped)")
            continue
        if not line:
            return
        text = line.decode(errors="replace").rstrip()
        tail.append(text)
        server_log.info(text)


async def _terminate(server: _Server, grace: float) -> None:
    """SIGTERM the group and give it `grace` seconds to be gone (the leader exited and the
    output pipe closed, so its children are gone too), then SIGKILL whatever is left."""
    _signal_group(server.proc.pid, signal.SIGTERM)
    if not await _gone(server, grace):
        log.warning("the SGLang server was still running %gs after SIGTERM; killing it", grace)
    _signal_group(server.proc.pid, signal.SIGKILL)
    await _gone(server, 5.0)


async def _gone(server: _Server, timeout: float) -> bool:
    # Polled: what `Process.wait()` waits for differs between Python versions.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while server.proc.returncode is None or not server.logs.done():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _terminate_group(pid: int, grace: float) -> None:
    """`_terminate` without an event loop, for the finalizer (garbage collection, exit); it
    can only watch the leader."""
    if not _signal_group(pid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not _exited(pid):
        time.sleep(0.05)
    _signal_group(pid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # already reaped, by asyncio's child watcher
        return True
    return reaped != 0


def _signal_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:
            raise SGLangLaunchError(f"cannot listen on host {host!r}: {exc}") from None
        return sock.getsockname()[1]


def _url_host(host: str) -> str:
    """Where to reach a server bound to `host` (a wildcard bind is reached on loopback)."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{host}]" if ":" in host else host
