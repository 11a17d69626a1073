"""Configuration: one typed model, five layers, and the origin of every value.

Precedence, lowest first: defaults < user file (`~/.config/opencomposer/config.toml`) <
workspace file (`<workspace>/.opencomposer.toml`) < `OPENCOMPOSER_*` environment variables
(nested with `__`, e.g. `OPENCOMPOSER_ENGINE__BASE_URL`) < command-line flags. Each layer is
read by a pydantic-settings source, the layers are deep-merged while remembering which one
set each key, and the merge is validated once, so an error can name the file (or variable)
and key it came from.

A workspace file travels with a repository that may not be the user's own, so it may only
tighten what protects the user: each such setting says how, as field metadata (`config_trust`),
and the workspace layer is judged against what the user's own layers make without it.
"""

import difflib
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from opencomposer import paths
from opencomposer.agent.protocol.common import ApprovalPolicy
from opencomposer.config_trust import (
    AtMost,
    Grows,
    Loosens,
    Narrows,
    SafeValue,
    StricterApproval,
    UserOnly,
    governed,
)

ENV_PREFIX = "OPENCOMPOSER_"
ENV_DELIMITER = "__"

# What a repository could do with a key its `.opencomposer.toml` sets (`config_trust`).
_SENDS_CODE = UserOnly("send your code, prompts or credentials elsewhere")
_COMMAND_LIMIT = AtMost("let one command use more of this machine")
_TURN_LIMIT = AtMost("let a turn run longer unattended, spending your time and tokens")


class Section(BaseModel):
    """A config table. Unknown keys are errors, so a typo never silently does nothing."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)


class EngineSettings(Section):
    backend: Annotated[Literal["embedded", "openai", "sglang"], _SENDS_CODE] = "embedded"
    """Which engine serves the model. `embedded`: the PyTorch engine in this process (CPU, or
    CUDA when present) running `model` from `models_dir` or a folder. `openai`: any
    OpenAI-compatible server (SGLang, vLLM, llama.cpp, hosted APIs) at `base_url`. `sglang`:
    an SGLang server this process launches from `sglang_launch` (GPU hosts)."""

    base_url: Annotated[str, _SENDS_CODE] = "http://127.0.0.1:30000/v1"
    """Base URL of the OpenAI-compatible server, including `/v1` (SGLang listens on 30000)."""

    model: str | None = None
    """Model to serve: for `embedded`, a model name (`opencomposer models list`) or a folder
    in Hugging Face layout, `smollm2-135m` when unset; for servers, the model id to request,
    the first one the server lists when unset."""

    model_aliases: dict[str, str] = Field(default_factory=dict)
    """For servers: names clients may use for a model, each mapped to the id the server
    knows it by (llama.cpp names its model after the file it loaded), e.g.
    `{ smollm2 = "/models/SmolLM2-135M-Instruct-Q8_0.gguf" }`. Aliases are listed by
    `/v1/models` next to the server's own ids."""

    context_window: int | None = Field(default=None, ge=256)
    """For servers: the model's context window in tokens, used where the server does not
    report one (vLLM and SGLang list it, llama.cpp's `/props` says it; llama-cpp-python and
    hosted APIs do not)."""

    api_key: Annotated[SecretStr | None, _SENDS_CODE] = None
    """Bearer key for the upstream server. Never logged, never shown to the model."""

    connect_timeout: float = Field(default=10.0, gt=0)
    """Seconds allowed to open a connection to the upstream server."""

    idle_timeout: float = Field(default=120.0, gt=0)
    """Longest silence, in seconds, tolerated from the upstream while waiting for the next
    chunk; past it the request fails with a timeout instead of hanging. A request that does
    not stream (for a client that does not, or with tools to a server that cannot stream
    them) hears nothing until its answer is complete, so there it bounds the whole answer."""

    max_retries: int = Field(default=2, ge=0, le=10)
    """Retries (with backoff) for refused connections, 429 and 5xx before any output."""

    server_flavor: Literal["generic", "sglang", "vllm"] = "generic"
    """Which server-specific request fields may be sent when training data is asked for
    (token ids, routed experts, speculative-decoding stats). `generic` sends only standard
    OpenAI fields, which every server accepts."""

    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the embedded engine runs: `auto` picks CUDA when a GPU is visible."""

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights and activations of the embedded engine: `auto` is float32 on CPU and bfloat16
    on CUDA."""

    threads: int | None = Field(default=None, ge=1)
    """CPU threads for the embedded engine's math (process-wide); unset keeps PyTorch's
    default of one per core. On a small machine shared with other work, 1 is often faster:
    measured on 2 busy cores, OpenMP threads spin waiting for a descheduled peer."""

    speculative: Literal["auto", "none", "mtp"] = "auto"
    """MTP speculative decoding in the embedded engine: `auto` uses it when the model has an
    MTP layer. Lossless: the output is what plain decoding would produce."""

    draft_tokens: int | None = Field(default=None, ge=1, le=8)
    """Tokens the MTP layer drafts per step; unset: what the model's folder says
    (`speculative.json`, from `opencomposer engine bench --save`), else 3."""

    kv_cache_tokens: int = Field(default=16_384, ge=256)
    """Token slots of KV cache the embedded engine allocates (shared by all requests)."""

    max_batch_tokens: int = Field(default=2048, ge=16)
    """New tokens the embedded engine processes per forward (long prompts go in chunks)."""

    kernels: Literal["reference", "triton"] = "reference"
    """Which MoE kernels the embedded engine runs: `reference` is plain PyTorch (always on
    CPU); `triton` runs the Triton kernels on CUDA and fails at the first call if triton is
    not installed (`pip install 'opencomposer[kernels]'`)."""

    sglang_launch: Annotated[
        str | None, UserOnly("launch a program of its choosing as the engine")
    ] = None
    """For `sglang`: `MODEL_PATH[,key=value...]`, e.g. `/models/DeepSeek-V3,tp=8,spec=mtp`;
    see `opencomposer engine --help`."""

    text_tool_calls: Literal["auto", "off", "kimi_k2", "deepseek_v3", "hermes"] = "auto"
    """How to read tool calls that a model prints as text instead of native `tool_calls`:
    `auto` recognizes all known formats, `off` leaves text untouched."""


class ServerSettings(Section):
    host: str = "127.0.0.1"
    """Address the HTTP server binds. Anything but loopback requires `token`."""

    port: int = Field(default=8765, ge=0, le=65535)
    """TCP port of the HTTP server (0 picks a free one)."""

    token: SecretStr | None = None
    """Bearer token clients must send. Unset: one is generated once, kept in
    `<home>/server-token` (mode 0600) and printed at start-up."""

    auth: Literal["token", "none"] = "token"
    """`token`: every API request carries `Authorization: Bearer <token>`, on loopback too (any
    local process and, through DNS rebinding, any web page can reach 127.0.0.1). `none` is
    accepted only while `host` is a loopback address."""

    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names (as in the `Host` header, without the port) accepted besides loopback names
    and addresses, e.g. the name of a reverse proxy. Any other Host is refused (403): that is
    what defeats DNS rebinding."""

    allowed_origins: list[str] = Field(default_factory=list)
    """Browser origins (`scheme://host[:port]`) allowed to call the API besides the server's
    own page. A request with any other `Origin` is refused (403)."""

    workspace_roots: list[Path] = Field(default_factory=lambda: [Path.home()])
    """Folders under which clients may open a workspace (symlinks resolved): a thread's
    workspace must be one of them or inside one. Default: your home folder."""

    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """Largest request body accepted; a bigger one is refused with 413 before it is read."""

    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds a client has to send a request's head (request line and headers), from the
    connection's opening or the first byte of a later request; then 408 and closed. A client
    sends its head in one write (well under a millisecond on loopback)."""

    idle_timeout: float = Field(default=5.0, gt=0)
    """Seconds a kept-alive connection may wait for its next request (uvicorn's default)."""

    body_timeout: float = Field(default=30.0, gt=0)
    """Seconds a request body may take, plus one for every 500 bytes that came (Apache's
    `mod_reqtimeout` rule); a body that stalls or trickles gets 408 and the connection is
    closed. Responses, a turn's event stream among them, have no time limit."""

    shutdown_timeout: float = Field(default=10.0, gt=0)
    """Seconds a stop (Ctrl-C, SIGTERM) waits for the requests in flight to finish; then they
    are cancelled (a generation is aborted with its request) and the engine is closed, so a
    long generation never keeps a stopping server up."""

    max_connections: int = Field(default=1000, ge=1)
    """Open connections at once, and never more than half the process's file descriptor
    limit. At the cap, a new connection closes the one open longest that has not sent the
    token (then the one idle longest that has); connections answering requests that carry the
    token are never closed to make room."""


class SandboxSettings(Section):
    env: Annotated[
        list[str], Narrows("pass more of your environment, credentials included, to commands")
    ] = Field(default_factory=list)
    """Environment variables passed to commands besides the built-in allow-list (PATH, HOME,
    LANG, LC_*, TERM, toolchain folders, ...): names, or patterns such as `MYAPP_*`. Anything
    else in the server's environment never reaches a command."""

    expose: Annotated[list[Path], Narrows("show commands more of your files")] = Field(
        default_factory=list
    )
    """Host folders or files shown read-only to commands although they lie in a hidden place
    (the home folders are hidden except the toolchains on PATH and the Python in use)."""

    hide: Annotated[list[Path], Grows("show commands what you hid")] = Field(default_factory=list)
    """Host folders or files commands never see, wherever they are (masked like the
    credential stores): a benchmark's tasks, with their tests and solutions, while an agent
    works on one of them."""

    view: Annotated[
        Literal["host", "system"], SafeValue("show commands your files", safe="system")
    ] = "host"
    """What commands see of this machine's files. `host`: everything read-only but the home
    folders, the runtime folders (/run) and what the system keeps private. `system`: only the
    installed system (/usr, /etc, /bin, /lib*), the toolchains on PATH, Python, git's config
    and `expose` (benchmark trials use it: answers lie somewhere on the host)."""

    network: Annotated[
        Literal["host", "isolated"],
        SafeValue("let commands reach the services on this machine", safe="isolated"),
    ] = "host"
    """How a command allowed the network reaches it. `host`: this machine's network, its
    loopback services included (a dev server on localhost:3000). `isolated`: a network of its
    own behind a user-mode NAT (slirp4netns) that reaches the internet but nothing listening on
    this machine's loopback."""

    max_processes: Annotated[int, _COMMAND_LIMIT] = Field(default=1024, ge=16)
    """Processes and threads one command may have at once; reaching it kills the command (a
    fork bomb is stopped within a fraction of a second)."""

    max_memory_bytes: Annotated[
        int | None,
        AtMost("let one command use more of this machine", unset_is_unlimited=False),
    ] = Field(default=None, ge=64 * 1024 * 1024)
    """Memory one command may use, all its processes together; unset: half of this machine's
    memory."""

    max_file_bytes: Annotated[int, _COMMAND_LIMIT] = Field(default=2 * 1024**3, ge=1024 * 1024)
    """Largest file a command may write (a runaway log would fill the disk otherwise)."""

    max_cpu_seconds: Annotated[int, _COMMAND_LIMIT] = Field(default=2 * 60 * 60, ge=1)
    """CPU time one process of a command may use before it is stopped."""

    max_lifetime: Annotated[float, _COMMAND_LIMIT] = Field(default=3600.0, gt=0)
    """Seconds a command may run, in the foreground or as a background job, before it is
    killed."""


class ToolSettings(Section):
    output_cap: Annotated[
        int, AtMost("make every command's output cost more tokens and storage")
    ] = Field(default=30_000, ge=1_000)
    """Most characters of one tool result the model reads; longer output keeps its head and
    tail with a note of what was cut."""

    read_lines: int = Field(default=2_000, ge=10)
    """Lines `read_file` returns when the call gives no `limit`."""

    checkpoint_max_bytes: Annotated[
        int, AtMost("make undo copy more of your disk into checkpoints")
    ] = Field(default=16 * 1024 * 1024, ge=0)
    """Largest file (apparent size: a sparse file counts whole) whose contents a checkpoint
    keeps for undo. A larger file is changed all the same, never read whole, and the tool's
    result says that undo cannot restore it."""

    command_timeout: float = Field(default=30.0, gt=0)
    """Seconds a command runs in the foreground before control returns with partial output
    (the command keeps running as a background job)."""

    allow_network: Annotated[
        bool, SafeValue("let commands send your code out or fetch what they run", safe=False)
    ] = False
    """Whether sandboxed commands may reach the network."""

    secret_env: Annotated[list[str], Grows("hand your secrets to the commands it runs")] = Field(
        default_factory=list
    )
    """Environment variable names whose values are secrets: never passed to commands (not
    even through `tools.sandbox.env`) and always masked. Values that look like credentials
    (secret-sounding names, URLs with passwords, random tokens) are masked without it."""

    sandbox: Annotated[SandboxSettings, UserOnly("change what commands see and may use")] = Field(
        default_factory=SandboxSettings
    )
    """What commands see and may use. A workspace file may only tighten it: hide more, pass
    and expose less, lower the limits; its other keys are the user's own config's."""


class AgentSettings(Section):
    max_steps: Annotated[int, _TURN_LIMIT] = Field(default=100, ge=1)
    """Model calls one turn may make before it stops (summaries not counted)."""

    max_turn_tokens: Annotated[int | None, _TURN_LIMIT] = Field(default=None, ge=1)
    """Tokens one turn may spend (prompt tokens not served from the engine's cache, plus
    generated tokens); unset means no limit."""

    max_wall_time: Annotated[float | None, _TURN_LIMIT] = Field(default=3600.0, gt=0)
    """Seconds one turn may run; unset means no limit."""

    max_step_tokens: int | None = Field(default=None, ge=16)
    """Most tokens the model may generate in one step (capped by the room left in its
    context window); unset means a quarter of the model's window, at most 8,192 (`doctor`
    says what that is for the configured model)."""

    repeated_text_chars: int = Field(default=400, ge=0)
    """Characters of one piece of the model's output repeated over and over (at least four
    times) that stop its step as a loop, with `stop_reason: repeated_text`; 0 turns the check
    off. Exact repeats only: lists and tables of different values never count."""

    temperature: float | None = Field(default=None, ge=0)
    """Sampling temperature for agent steps; unset uses the engine's default."""

    context_window: int | None = Field(default=None, ge=1024)
    """The model's context window in tokens; unset asks the engine, and assumes 32768 when
    the engine does not say."""

    summary_trigger: float = Field(default=0.8, gt=0)
    """When to self-summarize: a fraction of the context window (up to 1), or an absolute
    number of context tokens (above 1)."""

    summary_max_tokens: int = Field(default=4096, ge=256)
    """Tokens the model may use to think and write its summary (it is asked for about
    1,000); at most an eighth of the context window. This much of the window is always kept
    free, so summarizing cannot overflow."""

    capture: bool = True
    """Ask the engine for what training needs (token ids, logprobs, routed experts,
    speculative-decoding statistics) and store it with each model call; engines return what
    they can."""

    repetition_limit: Annotated[int, _TURN_LIMIT] = Field(default=4, ge=2)
    """Identical failing tool calls in a row that stop the turn; the model is warned one
    call earlier. Calls that succeed (polling a job, re-running tests) never count."""

    approval: Annotated[ApprovalPolicy, StricterApproval("run tool calls without asking you")] = (
        Field(default_factory=ApprovalPolicy)
    )
    """Which tool calls run on their own, are asked about, or are refused (by class, tool
    and command). A workspace file may only make it stricter."""

    approval_timeout: float = Field(default=600.0, gt=0)
    """Seconds to wait for a client to answer an approval before the call is denied."""


class CompletionSettings(Section):
    enabled: bool = True
    """Offer inline completions (`textDocument/inlineCompletion`, or `completion` for editors
    without inline completion)."""

    debounce_ms: int = Field(default=75, ge=0, le=2000)
    """Wait this long after a request before asking the model; a newer request for the same
    document in that time replaces it, so typing does not queue generations."""

    max_tokens: int = Field(default=64, ge=1, le=1024)
    """Longest completion, in tokens."""

    prefix_chars: int = Field(default=6000, ge=100)
    """Text before the cursor sent to the model."""

    suffix_chars: int = Field(default=2000, ge=0)
    """Text after the cursor sent to the model (fill-in-the-middle)."""

    related_chars: int = Field(default=4000, ge=0)
    """Text of other open documents of the same language, placed before the prefix."""

    temperature: float = Field(default=0.0, ge=0, le=2)


class LspSettings(Section):
    completion: CompletionSettings = Field(default_factory=CompletionSettings)

    apply_edits: bool = True
    """Send the agent's changes to files open in the editor as `workspace/applyEdit`, so they
    land in the buffer (undo, unsaved state and formatters work); files not open, and edits
    the editor refuses, are written to disk."""

    reveal_edits: bool | None = None
    """Ask the editor to show each file the agent changes (`window/showDocument`, without
    taking focus), where the editor supports it. Unset: only for editors without an
    opencomposer client, which shows the changes in its chat instead."""


class LoggingSettings(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Least severe level written to stderr and to `<home>/logs`."""


class Settings(BaseSettings):
    """Everything opencomposer can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        use_attribute_docstrings=True,
        validate_default=True,
    )

    home: Annotated[Path, UserOnly("move your data, traces and server token included")] = Field(
        default_factory=paths.default_home
    )
    """Data folder: traces, checkpoints, logs (env `OPENCOMPOSER_HOME`)."""

    models_dir: Annotated[Path, UserOnly("make the engine load a model of its choosing")] = Field(
        default_factory=paths.default_models_dir
    )
    """Where pulled and converted models are kept."""

    engine: EngineSettings = Field(default_factory=EngineSettings)
    server: Annotated[
        ServerSettings, UserOnly("change who may reach the server and which folders it opens")
    ] = Field(default_factory=ServerSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    lsp: LspSettings = Field(default_factory=LspSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)


class ConfigError(Exception):
    """Configuration that cannot be used; the message names the file or variable and key."""


DEFAULT_ORIGIN = "default"


@dataclass
class LoadedSettings:
    """Validated settings plus, for every key that was set, the layer that set it."""

    settings: Settings
    origins: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def origin(self, dotted_key: str) -> str:
        if dotted_key in self.origins:
            return self.origins[dotted_key]
        # A table-valued setting (a dict of rules) records the origin of each of its keys.
        inside = [o for k, o in self.origins.items() if k.startswith(dotted_key + ".")]
        return inside[-1] if inside else DEFAULT_ORIGIN

    def explain(self) -> list[tuple[str, Any, str]]:
        """(key, value, origin) for every leaf setting, secrets masked."""
        return [(key, value, self.origin(key)) for key, value in _leaves(self.settings)]


def load_settings(
    workspace: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    user_file: Path | None = None,
) -> LoadedSettings:
    """Read every layer, merge them by precedence and validate the result.

    `overrides` are command-line values keyed by dotted path (`{"server.port": 9000}`).
    """
    user_file = user_file or paths.user_config_file()
    layers: list[tuple[str, dict[str, Any]]] = []
    files: list[Path] = []
    if user_file.is_file():
        layers.append((f"user file {user_file}", _read_toml(user_file)))
        files.append(user_file)
    judge = None
    if workspace is not None:
        workspace_file = workspace / paths.WORKSPACE_CONFIG_NAME
        if workspace_file.is_file():
            judge = (len(layers), workspace_file)
            layers.append((f"workspace file {workspace_file}", _read_toml(workspace_file)))
            files.append(workspace_file)
    layers.append(("env", EnvSettingsSource(Settings)()))
    if overrides:
        layers.append(("command line", _nest(overrides)))
    if judge is not None:
        _tighten_only(layers, *judge)
    settings, origins = _validated(layers)
    return LoadedSettings(settings=settings, origins=origins, files=files)


def _validated(layers: list[tuple[str, dict[str, Any]]]) -> tuple[Settings, dict[str, str]]:
    """The layers merged by precedence and validated, with the origin of every key set."""
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for origin, data in layers:
        _merge(merged, data, origins, origin)
    for key, origin in origins.items():
        if origin == "env":
            origins[key] = f"env {_env_name(key)}"
    try:
        return Settings.model_validate(merged), origins
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins)) from None


def _tighten_only(layers: list[tuple[str, dict[str, Any]]], index: int, path: Path) -> None:
    """Judge the workspace layer `layers[index]`, read from `path`, against what the user's
    own layers make without it, in place: refuse a key it may not set or a value that would
    loosen, and replace a list that may only grow by its union with the user's."""
    data = layers[index][1]
    judged = list(governed(Settings, data))
    for key, rule in judged:
        if isinstance(rule, UserOnly):
            raise ConfigError(
                f"{path}: key {key} cannot be set in a workspace file, because a repository "
                f"could use it to {rule.risk}; set it in {paths.user_config_file()} or "
                f"{_env_name(key)} instead"
            )
    if not judged:
        return
    below, _ = _validated(layers[:index] + layers[index + 1 :])
    proposed, _ = _validated(layers)
    for key, rule in judged:
        try:
            admitted = rule.admit(_value(below, key), _value(proposed, key))
        except Loosens as exc:
            raise ConfigError(
                f"{path}: {key} cannot be loosened by a workspace file: {exc}. A repository "
                f"could use it to {rule.risk}; if you want it, set it in "
                f"{paths.user_config_file()} or {_env_name(key)}"
            ) from None
        if isinstance(rule, Grows):
            *parents, leaf = key.split(".")
            node = data
            for part in parents:
                node = node[part]
            node[leaf] = admitted


def _value(settings: Settings, dotted_key: str) -> Any:
    value: Any = settings
    for part in dotted_key.split("."):
        value = getattr(value, part)
    return value


def parse_override(assignment: str) -> tuple[str, Any]:
    """Parse a `-c key=value` flag; the value is read as TOML, else taken as a string."""
    key, sep, raw = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"expected KEY=VALUE, got {assignment!r} (e.g. -c server.port=9000)")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return TomlConfigSettingsSource(Settings, toml_file=path)()
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None


def _nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"command line: {dotted} conflicts with another -c value")
        node[leaf] = value
    return nested


def _merge(
    into: dict[str, Any], data: Mapping[str, Any], origins: dict[str, str], origin: str, prefix=""
) -> None:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and isinstance(into.get(key), dict | type(None)):
            _merge(into.setdefault(key, {}), value, origins, origin, dotted + ".")
        else:
            into[key] = value
            origins[dotted] = origin


def _leaves(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            yield from _leaves(value, f"{prefix}{name}.")
        elif isinstance(value, SecretStr):
            yield f"{prefix}{name}", "********"
        else:
            yield f"{prefix}{name}", value


def _env_name(dotted_key: str) -> str:
    return ENV_PREFIX + dotted_key.replace(".", ENV_DELIMITER).upper()


def _where(dotted_key: str, origins: Mapping[str, str]) -> str:
    """Name the layer that set a key (or its nearest parent)."""
    probe = dotted_key
    while probe:
        if probe in origins:
            return origins[probe]
        probe = probe.rpartition(".")[0]
    return DEFAULT_ORIGIN


def _valid_keys(loc: tuple[str | int, ...]) -> list[str]:
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        annotation = model.model_fields[str(part)].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _describe(exc: ValidationError, origins: Mapping[str, str]) -> str:
    lines = ["invalid configuration:"]
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        key = ".".join(str(part) for part in loc)
        where = _where(key, origins)
        if error["type"] == "extra_forbidden":
            valid = _valid_keys(loc)
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            lines.append(f"  {where}: unknown key {key}{hint} (valid here: {', '.join(valid)})")
        else:
            shown = "********" if "key" in key or "token" in key else repr(error.get("input"))
            lines.append(f"  {where}: {key} = {shown}: {error['msg']}")
    return "\n".join(lines)
