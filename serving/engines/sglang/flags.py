"""SGLang's server flags for a launch: the spec string users write, and the command line
derived from it and the checkpoint's config.json.

The flags are derived from the checkpoint because the right ones differ by family and
mistakes show up late (after minutes of weight loading) or silently (tool calls left as text,
answers filed as reasoning):
- DeepSeek-V3/R1 carry one MTP (NextN) layer, which SGLang drafts with through its EAGLE
  worker and no separate draft model. Kimi K2/K2.5 ship no MTP weights, so they speculate
  only with an external EAGLE-3 draft.
- Tool-call and reasoning parsers depend on family and version.
"""

import difflib
import json
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass

from opencomposer.serving.engines.errors import EngineError

log = logging.getLogger(__name__)

SGLANG_SERVER = (sys.executable, "-m", "sglang.launch_server")

Positive = Annotated[int, Field(ge=1)]


class SGLangLaunchError(EngineError):
    """Launch options that cannot work (a bad spec string, an invalid combination)."""

    kind = "engine_config"


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class SGLangLaunch:
    """How to launch the server. Parsers left unset are chosen from the checkpoint; `none`
    turns one off. Port 0 picks a free port at launch."""

    model_path: str
    host: str = "127.0.0.1"
    """Loopback by default: the server has no authentication of its own."""
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    tp: Positive = 1
    dp: Positive = 1
    ep: Positive = 1
    enable_dp_attention: bool = False
    speculative: Literal["auto", "none", "mtp", "eagle3"] = "auto"
    """`auto`: EAGLE-3 when a draft is given, else the checkpoint's MTP layer if it has one."""
    draft_model_path: str | None = None
    num_steps: Positive = 3
    topk: Positive = 1
    num_draft_tokens: Positive = 4
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    mem_fraction_static: Annotated[float, Field(gt=0, lt=1)] | None = None
    context_length: Positive | None = None
    served_model_name: str | None = None
    extra_args: tuple[str, ...] = ()
    startup_timeout: Annotated[float, Field(gt=0)] = 1800.0
    """Seconds to wait for health; loading a 671B checkpoint takes many minutes."""
    stop_grace: Annotated[float, Field(gt=0)] = 30.0


_SPEC_ALIASES = {
    "spec": "speculative",
    "draft": "draft_model_path",
    "dp_attention": "enable_dp_attention",
    "mem": "mem_fraction_static",
    "context": "context_length",
    "name": "served_model_name",
    "arg": "extra_args",
}


def launch_from_spec(spec: str) -> SGLangLaunch:
    """Parse `sglang:MODEL_PATH[,key=value...]`, e.g. `sglang:/models/dsv3,tp=8,spec=mtp`.

    Keys are `SGLangLaunch` field names or the aliases in `_SPEC_ALIASES`; `arg=` may repeat,
    each adding one extra command-line token."""
    scheme, colon, rest = spec.partition(":")
    path, *pairs = rest.split(",")
    if scheme != "sglang" or not colon or not path.strip():
        raise SGLangLaunchError(f"expected sglang:MODEL_PATH[,key=value...], got {spec!r}")
    keys = sorted({f.name for f in fields(SGLangLaunch)} - {"model_path"} | set(_SPEC_ALIASES))
    values: dict[str, Any] = {"model_path": path.strip()}
    extra: list[str] = []
    for pair in pairs:
        key, equals, value = (part.strip() for part in pair.partition("="))
        name = _SPEC_ALIASES.get(key, key)
        if not equals:
            raise SGLangLaunchError(f"{spec!r}: expected key=value, got {pair!r}")
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(keys)}"
            raise SGLangLaunchError(f"{spec!r}: unknown key {key!r} ({hint})")
        if name == "extra_args":
            extra.append(value)
        elif name in values:
            raise SGLangLaunchError(f"{spec!r}: {key} is given twice")
        else:
            values[name] = value
    try:
        launch = SGLangLaunch(**values, extra_args=tuple(extra))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}={e['input']!r}: {e['msg']}" for e in exc.errors()
        )
        raise SGLangLaunchError(f"{spec!r}: {problems}") from None
    _check_options(launch)
    return launch


def read_model_config(model_path: str) -> dict[str, Any]:
    """The checkpoint's config.json. A hub id (which SGLang downloads itself) gives `{}`,
    so nothing model-specific is chosen for it."""
    folder = Path(model_path).expanduser()
    if not folder.is_dir():
        if model_path.startswith(("/", ".", "~")):
            raise SGLangLaunchError(f"no checkpoint folder at {model_path}")
        log.warning("%s is not a local folder; launching without model-specific flags", model_path)
        return {}
    file = folder / "config.json"
    try:
        config = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise SGLangLaunchError(f"{file}: cannot read it as JSON: {exc}") from None
    if not isinstance(config, dict):
        raise SGLangLaunchError(f"{file}: not a JSON object")
    return config


class _Family(NamedTuple):
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    trust_remote_code: bool = False


def _family(config: dict[str, Any], path: str) -> _Family:
    """Parsers for the checkpoint. Kimi K2 reuses DeepSeek-V3's architecture, so it is told
    apart by name first. DeepSeek versions share one config shape and differ by name:
    `deepseek-r1` assumes output starts inside reasoning, which would file every answer of
    non-thinking V3 as reasoning, so V3 gets no reasoning parser and the hybrid-thinking
    V3.1/V3.2 get `deepseek-v3`."""
    text = config.get("text_config") or {}
    names = [config.get("model_type"), text.get("model_type"), config.get("_name_or_path"), path]
    names += [*(config.get("architectures") or ()), *(text.get("architectures") or ())]
    identity = " ".join(str(name) for name in names if name).lower()
    if "kimi" in identity:
        return _Family("kimi_k2", "kimi_k2", trust_remote_code=True)
    if "deepseek" not in identity:
        return _Family()
    if re.search(r"(?<![a-z0-9])r1(?![0-9])", identity):
        return _Family("deepseekv3", "deepseek-r1")
    if re.search(r"v3[._-]?2(?![0-9])", identity):
        return _Family("deepseekv32", "deepseek-v3")
    if re.search(r"v3[._-]?1(?![0-9])", identity):
        return _Family("deepseekv31", "deepseek-v3")
    return _Family("deepseekv3")


def _nextn_layers(config: dict[str, Any]) -> int:
    text = config.get("text_config") or {}
    return int(config.get("num_nextn_predict_layers") or text.get("num_nextn_predict_layers") or 0)


def _check_options(launch: SGLangLaunch) -> None:
    """Combinations that are wrong whatever the checkpoint."""
    if launch.speculative == "eagle3" and not launch.draft_model_path:
        raise SGLangLaunchError("speculative=eagle3 needs draft_model_path (an EAGLE-3 draft)")
    if launch.draft_model_path and launch.speculative in ("mtp", "none"):
        raise SGLangLaunchError(
            f"draft_model_path is only used by speculative=eagle3, not {launch.speculative} "
            "(mtp drafts with the checkpoint's own NextN layer)"
        )
    if launch.enable_dp_attention and (launch.dp < 2 or launch.tp % launch.dp):
        raise SGLangLaunchError(
            f"enable_dp_attention needs dp >= 2 dividing tp (got tp={launch.tp}, dp={launch.dp})"
        )


def _speculation(launch: SGLangLaunch, config: dict[str, Any]) -> str | None:
    """SGLang's --speculative-algorithm for the launch, or None."""
    mode, has_mtp = launch.speculative, _nextn_layers(config) >= 1
    if mode == "auto":
        mode = "eagle3" if launch.draft_model_path else "mtp" if has_mtp else "none"
        if mode == "none":
            log.warning(
                "speculative decoding is off: %s has no MTP layer and no EAGLE-3 draft was "
                "given (set draft_model_path)",
                launch.model_path,
            )
    if mode == "mtp" and not has_mtp:
        raise SGLangLaunchError(
            f"speculative=mtp needs a checkpoint with an MTP (NextN) layer, and "
            f"{launch.model_path} has none (num_nextn_predict_layers = 0; Kimi K2 ships no MTP "
            "weights): use speculative=eagle3 with an EAGLE-3 draft_model_path"
        )
    return {"none": None, "mtp": "EAGLE", "eagle3": "EAGLE3"}[mode]


def build_command(
    launch: SGLangLaunch, model_config: dict[str, Any], *, prefix: Sequence[str] = SGLANG_SERVER
) -> list[str]:
    """The server's command line for a launch and the checkpoint's config.json."""
    _check_options(launch)
    family = _family(model_config, launch.model_path)
    algorithm = _speculation(launch, model_config)
    command = [*prefix, "--model-path", launch.model_path, "--host", launch.host]
    command += ["--port", str(launch.port), "--tp-size", str(launch.tp)]
    if launch.served_model_name:
        command += ["--served-model-name", launch.served_model_name]
    if launch.dp > 1:
        command += ["--dp-size", str(launch.dp)]
    if launch.ep > 1:
        command += ["--ep-size", str(launch.ep)]
    if launch.enable_dp_attention:
        command.append("--enable-dp-attention")
    if family.trust_remote_code:
        command.append("--trust-remote-code")
    for flag, parser in (
        ("--tool-call-parser", launch.tool_call_parser or family.tool_call_parser),
        ("--reasoning-parser", launch.reasoning_parser or family.reasoning_parser),
    ):
        if parser and parser != "none":
            command += [flag, parser]
    if algorithm:
        command += ["--speculative-algorithm", algorithm]
        if algorithm == "EAGLE3":
            command += ["--speculative-draft-model-path", str(launch.draft_model_path)]
        command += ["--speculative-num-steps", str(launch.num_steps)]
        command += ["--speculative-eagle-topk", str(launch.topk)]
        command += ["--speculative-num-draft-tokens", str(launch.num_draft_tokens)]
    if launch.mem_fraction_static is not None:
        command += ["--mem-fraction-static", str(launch.mem_fraction_static)]
    if launch.context_length is not None:
        command += ["--context-length", str(launch.context_length)]
    return [*command, *launch.extra_args]
