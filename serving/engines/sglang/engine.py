"""The `sglang` engine: an SGLang server launched on first use, served through its
OpenAI-compatible API.

Requests go through `OpenAIEngine` with `server_flavor="sglang"`, which lets token ids, routed
experts and speculative-decoding stats be captured for training. The server is launched again
if it died, and stopped on `aclose`.

New weights go through SGLang's `POST /update_weights_from_disk`: they are written as a
safetensors checkpoint in a folder under the model's (`UPDATES_FOLDER`), which the server
loads, replacing the parameters it names; only the latest update's folder is kept. SGLang
finishes the requests it is running before it swaps weights, and requests started during an
update wait for it here, so each result's `weights_version` names the weights it ran on.
"""

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path

import httpx
from safetensors.torch import save_file

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import (
    EngineEvent,
    Finished,
    GenerationRequest,
    ModelInfo,
    Weights,
)
from opencomposer.serving.engines.errors import EngineRequestError, EngineUnavailable
from opencomposer.serving.engines.openai import OpenAIEngine
from opencomposer.serving.engines.sglang.flags import SGLANG_SERVER, SGLangLaunch
from opencomposer.serving.engines.sglang.supervisor import SGLangServer

log = logging.getLogger(__name__)

UPDATES_FOLDER = "opencomposer-weights"
"""Under the model's folder: one subfolder per weights update, the latest kept."""


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
        self._server: SGLangServer | None = None
        self._client: OpenAIEngine | None = None
        self._updating = asyncio.Lock()
        """Held by an update; a request starts once none runs."""
        self._weights_version: str | None = None
        self._update_folder: Path | None = None

    @property
    def launch(self) -> SGLangLaunch:
        """What the server is (or will be) launched with."""
        return self._launch

    async def models(self) -> list[ModelInfo]:
        return await (await self._started()).models()

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[EngineEvent, None]:
        client = await self._started()
        async with self._updating:
            version = self._weights_version
        async with aclosing(client.generate(request)) as stream:
            async for event in stream:
                if isinstance(event, Finished) and version is not None:
                    event = Finished(event.result.with_weights_version(version))
                yield event

    async def update_weights(self, weights: Weights, version: str, *, delta: bool = False) -> None:
        if delta:
            raise EngineRequestError(
                "the sglang backend takes whole checkpoints from disk (SGLang's "
                "update_weights_from_disk), not deltas: add the delta to the weights and send "
                "those with delta=False"
            )
        await self._started()
        async with self._updating:
            server = self._server
            if server is None or not server.running:
                raise EngineUnavailable("the SGLang server exited before the weights update")
            folder = await asyncio.to_thread(self._write_update, weights)
            try:
                await self._load_update(server.url, folder, version)
            except BaseException:
                await asyncio.to_thread(shutil.rmtree, folder, True)
                raise
            previous, self._update_folder = self._update_folder, folder
            self._weights_version = version
        if previous is not None:
            await asyncio.to_thread(shutil.rmtree, previous, True)

    def _write_update(self, weights: Weights) -> Path:
        """A new folder under the model's holding the update as one safetensors file."""
        model = Path(self._launch.model_path).expanduser()
        if not model.is_dir():
            raise EngineRequestError(
                f"weights updates are written beside a local checkpoint, and "
                f"{self._launch.model_path} is not a folder"
            )
        try:
            root = model / UPDATES_FOLDER
            root.mkdir(exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="update-", dir=root))
        except OSError as exc:
            raise EngineRequestError(
                f"cannot write the weights update under {model}: {exc}"
            ) from exc
        target = folder / "model.safetensors"
        try:
            if isinstance(weights, Path):
                _link_or_copy(weights, target)
            else:
                save_file({name: tensor.contiguous() for name, tensor in weights.items()}, target)
        except (OSError, ValueError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise EngineRequestError(f"cannot write the weights update: {exc}") from exc
        return folder

    async def _load_update(self, url: str, folder: Path, version: str) -> None:
        """Ask the server to load `folder`; loading a large checkpoint takes about as long as
        at launch, so the launch's startup timeout bounds it."""
        body = {"model_path": str(folder), "load_format": "safetensors", "weight_version": version}
        timeout = httpx.Timeout(self._launch.startup_timeout, connect=10.0)
        try:
            async with httpx.AsyncClient(timeout=timeout, trust_env=False) as http:
                response = await http.post(f"{url}/update_weights_from_disk", json=body)
        except httpx.HTTPError as exc:
            raise EngineUnavailable(f"the SGLang server did not take the weights: {exc}") from exc
        try:
            reply = response.json()
        except ValueError:
            reply = {}
        if response.status_code != 200 or not reply.get("success"):
            message = reply.get("message") or response.text or f"HTTP {response.status_code}"
            raise EngineRequestError(f"SGLang refused the weights update {version!r}: {message}")
        log.info("SGLang serves weights %s (%s)", version, reply.get("message", ""))

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
        if self._client is not None and server is not None and server.running:
            return self._client
        if self._starting is None or self._starting.done():
            self._starting = asyncio.create_task(self._start())
        return await asyncio.shield(self._starting)

    async def _start(self) -> OpenAIEngine:
        if self._server is not None:  # it died after it was ready
            code = self._server.proc.returncode
            log.warning("the SGLang server exited (code %s); relaunching", code)
            if self._weights_version is not None:
                log.warning(
                    "the relaunched server serves %s's own weights, not update %s",
                    self._launch.model_path,
                    self._weights_version,
                )
                self._weights_version = None
            await self._shutdown()
        self._server = await SGLangServer.start(self._launch, self._prefix)
        update = {"base_url": f"{self._server.url}/v1", "server_flavor": "sglang"}
        self._client = OpenAIEngine(self._settings.model_copy(update=update))
        return self._client

    async def _shutdown(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        server, self._server = self._server, None
        if server is not None:
            await server.stop()


def _link_or_copy(source: Path, target: Path) -> None:
    """A safetensors file into the update's folder: a hard link costs no space, a copy where
    the file is on another file system."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
