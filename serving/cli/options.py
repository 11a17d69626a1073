"""Options shared by commands, and turning them into settings."""

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from opencomposer.config import LoadedSettings, load_settings, parse_override
from opencomposer.logs import configure_logging
from opencomposer.redact import Redactor

FLAG = ""
"""The metavar of an on/off option: typer would print `<bool>` where no value is given."""

Workspace = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Workspace folder (its .opencomposer.toml is read).",
        exists=True,
        file_okay=False,
        resolve_path=True,
    ),
]
ConfigOverrides = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        "-c",
        metavar="KEY=VALUE",
        help="Override a setting, e.g. -c agent.max_steps=20 or -c engine.model=tiny-moe "
        "(value read as TOML, else as a string). Repeatable.",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.", metavar=FLAG)]
EngineSpec = Annotated[
    str | None,
    typer.Option(
        "--engine",
        metavar="BACKEND:TARGET",
        help="The model engine: embedded:MODEL (a model name or folder, run in this process), "
        "openai:URL (any OpenAI-compatible server) or sglang:PATH (launch SGLang for a "
        "checkpoint, GPU hosts; SGLang flags follow as ,key=value). Default: engine.* from "
        "the config.",
    ),
]


class ApprovalPreset(StrEnum):
    """`--approval`: how tool calls that write, are dangerous or reach out are handled."""

    auto = "auto"
    ask = "ask"
    deny = "deny"


Approval = Annotated[
    ApprovalPreset | None,
    typer.Option(
        help="auto: run every call; ask: ask before anything that writes or reaches out; "
        "deny: refuse those. Default: agent.approval from the config.",
    ),
]

_APPROVAL_PRESETS = {
    # Read-only calls always run; the preset decides everything else.
    ApprovalPreset.auto: {"writes_workspace": "auto", "dangerous": "auto", "network": "auto"},
    ApprovalPreset.ask: {"writes_workspace": "ask", "dangerous": "ask", "network": "ask"},
    ApprovalPreset.deny: {"writes_workspace": "deny", "dangerous": "deny", "network": "deny"},
}


def approval_overrides(preset: ApprovalPreset | None) -> dict[str, Any]:
    """`--approval auto|ask|deny` as config overrides (typer has refused anything else)."""
    if preset is None:
        return {}
    return {f"agent.approval.{k}": v for k, v in _APPROVAL_PRESETS[preset].items()}


def engine_overrides(spec: str | None) -> dict[str, Any]:
    """`--engine BACKEND:TARGET` as config overrides."""
    if spec is None:
        return {}
    backend, _, target = spec.partition(":")
    if target:
        if backend == "openai":
            return {"engine.backend": "openai", "engine.base_url": target}
        if backend == "embedded":
            return {"engine.backend": "embedded", "engine.model": target}
        if backend == "sglang":
            return {"engine.backend": "sglang", "engine.sglang_launch": target}
    raise typer.BadParameter(
        f"unknown engine {spec!r}; use embedded:MODEL, openai:URL or sglang:MODEL_PATH",
        param_hint="--engine",
    )


def given(flags: dict[str, Any]) -> dict[str, Any]:
    """The flags the user set (None: not given), so that an unset flag merged after another
    (`--model` after `--engine embedded:DIR`) never hides the value that one set."""
    return {key: value for key, value in flags.items() if value is not None}


def overrides_from(assignments: list[str] | None, **flags: Any) -> dict[str, Any]:
    """`-c` assignments plus dedicated flags (which win); flags left unset are ignored."""
    overrides = dict(parse_override(a) for a in assignments or [])
    overrides.update({key: value for key, value in flags.items() if value is not None})
    return overrides


def settings_for(workspace: Path | None, overrides: dict[str, Any]) -> LoadedSettings:
    """Load settings and start logging as they say; raises ConfigError."""
    loaded = load_settings(workspace, overrides)
    settings = loaded.settings
    secrets = [s.get_secret_value() for s in (settings.engine.api_key, settings.server.token) if s]
    configure_logging(settings.logging.level, settings.home / "logs", Redactor(secrets))
    return loaded
