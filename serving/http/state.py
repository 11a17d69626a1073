"""What every route of the server shares: the settings, the model engine and the agent
runtime, created when the server starts and closed when it stops (see `app.lifespan`)."""

import time
from dataclasses import dataclass, field

from fastapi import Request

from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings
from opencomposer.serving.engines.base import Engine, ModelInfo

# How long the engine's model list is trusted: a remote backend answers it with a round trip,
# and every chat completion checks the requested model against it.
MODELS_TTL = 30.0


@dataclass
class ServerState:
    settings: Settings
    engine: Engine
    runtime: AgentRuntime
    _models: tuple[float, list[ModelInfo]] | None = field(default=None, repr=False)

    @property
    def forwards_requests(self) -> bool:
        """Whether an OpenAI-compatible upstream answers the model routes: then what a client
        leaves out (a temperature, a model name it does not list) is the upstream's to
        decide, not ours to fill in."""
        return self.settings.engine.backend == "openai"

    async def models(self) -> list[ModelInfo]:
        """The engine's models, asked again at most every MODELS_TTL seconds."""
        now = time.monotonic()
        if self._models is None or now - self._models[0] > MODELS_TTL:
            self._models = (now, await self.engine.models())
        return self._models[1]


def server_state(request: Request) -> ServerState:
    """FastAPI dependency: the running server's shared state."""
    return request.app.state.server
