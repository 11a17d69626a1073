"""Model engines behind one protocol (`base.Engine`); `make_engine` picks one from config."""

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import Engine


def make_engine(settings: EngineSettings) -> Engine:
    """The engine the settings describe (the backend's dependencies load only when used)."""
    match settings.backend:
        case "openai":
            from opencomposer.serving.engines.openai import OpenAIEngine

            return OpenAIEngine(settings)
