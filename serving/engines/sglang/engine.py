"""The `sglang` engine: an SGLang server launched on first use, served through its
OpenAI-compatible API.

Requests go through `OpenAIEngine` with `server_flavor="sglang"`, which lets token ids, routed
experts and speculative-decoding stats be captured for training. The server is launched again
if it died, and stopped on `aclose`.
"""

import asyncio
import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import replace

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import EngineEvent, GenerationRequest, ModelInfo, Weights
from opencomposer.serving.engines.errors import EngineRequestError
from opencomposer.serving.engines.openai import OpenAIEngine
from opencomposer.serving.engines.sglang.flags import SGLANG_SERVER, SGLangLaunch
from opencomposer.serving.engines.sglang.supervisor import SGLangServer

log = logging.getLogger(__name__)


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
        if self._client is not None and server is not None and server.running:
            return self._client
        if self._starting is None or self._starting.done():
            self._starting = asyncio.create_task(self._start())
        return await asyncio.shield(self._starting)

    async def _start(self) -> OpenAIEngine:
        if self._server is not None:  # it died after it was ready
            code = self._server.proc.returncode
            log.warning("the SGLang server exited (code %s); relaunching", code)
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
