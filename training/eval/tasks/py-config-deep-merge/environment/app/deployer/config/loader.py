import os
import tomllib
from pathlib import Path

from deployer.config.defaults import DEFAULTS
from deployer.config.env import from_environ
from deployer.config.merge import merge


def load(paths: list[Path] = (), environ: dict[str, str] | None = None) -> dict:
    """The effective configuration: DEFAULTS, then each file of `paths` that exists, then
    the environment (os.environ unless `environ` is given)."""
    config = DEFAULTS
    for path in paths:
        path = Path(path)
        if path.is_file():
            config = merge(config, tomllib.loads(path.read_text(encoding="utf-8")))
    overrides = from_environ(dict(os.environ) if environ is None else environ, DEFAULTS)
    return merge(config, overrides)
