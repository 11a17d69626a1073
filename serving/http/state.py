"""What every route of the server shares: the settings, the model engine and the agent
runtime, created when the server starts and closed when it stops (see `app.lifespan`)."""

from dataclasses import dataclass

from fastapi import Request

from opencomposer.agent.runtime import AgentRuntime
from opencomposer.config import Settings
from opencomposer.serving.engines.base import Engine


@dataclass
class ServerState:
    settings: Settings
    engine: Engine
    runtime: AgentRuntime


def server_state(request: Request) -> ServerState:
    """FastAPI dependency: the running server's shared state."""
    return request.app.state.server
