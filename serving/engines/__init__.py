"""Model engines behind one protocol (`base.Engine`); `make_engine` picks one from config."""

from pathlib import Path

from opencomposer.config import EngineSettings
from opencomposer.serving.engines.base import Engine


def make_engine(settings: EngineSettings, models_dir: Path) -> Engine:
    """The engine the settings describe (each backend's dependencies load only when used)."""
    match settings.backend:
        case "openai":
            from opencomposer.serving.engines.openai import OpenAIEngine

            return OpenAIEngine(settings)
        case "embedded":
            from opencomposer.serving.engines.embedded.service import EmbeddedEngine

            return EmbeddedEngine(settings, models_dir)
        case "sglang":
            from opencomposer.serving.engines.sglang.engine import SGLangEngine
            from opencomposer.serving.engines.sglang.flags import (
                SGLangLaunchError,
                launch_from_spec,
            )

            if not settings.sglang_launch:
                raise SGLangLaunchError(
                    "the sglang backend needs engine.sglang_launch (MODEL_PATH[,key=value...])"
                )
            return SGLangEngine(settings, launch_from_spec(f"sglang:{settings.sglang_launch}"))
