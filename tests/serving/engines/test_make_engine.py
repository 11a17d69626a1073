"""`make_engine`: the backend the config names, built without starting anything."""

from pathlib import Path

import pytest

from opencomposer.config import EngineSettings
from opencomposer.serving.engines import make_engine
from opencomposer.serving.engines.embedded.service import EmbeddedEngine
from opencomposer.serving.engines.openai import OpenAIEngine
from opencomposer.serving.engines.sglang.engine import SGLangEngine
from opencomposer.serving.engines.sglang.flags import SGLangLaunchError


def test_each_backend(tmp_path: Path) -> None:
    assert isinstance(make_engine(EngineSettings(), tmp_path), EmbeddedEngine)
    assert isinstance(make_engine(EngineSettings(backend="openai"), tmp_path), OpenAIEngine)
    engine = make_engine(
        EngineSettings(backend="sglang", sglang_launch="/models/dsv3,tp=8,spec=mtp"), tmp_path
    )
    assert isinstance(engine, SGLangEngine)
    assert (engine.launch.model_path, engine.launch.tp, engine.launch.speculative) == (
        "/models/dsv3",
        8,
        "mtp",
    )


def test_sglang_needs_a_launch_spec(tmp_path: Path) -> None:
    with pytest.raises(SGLangLaunchError, match=r"engine\.sglang_launch"):
        make_engine(EngineSettings(backend="sglang"), tmp_path)
    with pytest.raises(SGLangLaunchError):
        make_engine(EngineSettings(backend="sglang", sglang_launch="/m,tp=zero"), tmp_path)
