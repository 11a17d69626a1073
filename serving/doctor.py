"""What works on this machine, and what each missing piece disables.

Every check runs the real thing where that is cheap (a bubblewrap sandbox is started, the
model server is asked for its models, a SQLite database is opened in WAL mode), because
"installed" and "works" differ: bubblewrap is often present but unable to create namespaces
inside containers.
"""

import asyncio
import importlib.util
import platform
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import opencomposer
from opencomposer.agent.tools.sandbox import probe_bubblewrap
from opencomposer.agent.tools.terminal.limits import ResourceLimits
from opencomposer.agent.tools.terminal.seccomp import keyring_filter
from opencomposer.config import ConfigError, LoadedSettings, Settings, load_settings
from opencomposer.paths import find_program

if TYPE_CHECKING:
    from opencomposer.serving.engines.base import ModelInfo

Status = Literal["ok", "warn", "missing", "error"]

MIN_NEOVIM = (0, 9)
MIN_NODE = 20
_ENGINE_PROBE_TIMEOUT = 3.0


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    disables: str | None = None
    """What does not work while this check is not ok."""

    required: bool = False
    """The program cannot work at all without it."""


@dataclass
class Report:
    checks: list[Check]
    settings: LoadedSettings

    @property
    def healthy(self) -> bool:
        return all(c.status == "ok" for c in self.checks if c.required)

    def to_json(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "version": opencomposer.__version__,
            "checks": [asdict(c) for c in self.checks],
            "config_files": [str(p) for p in self.settings.files],
        }


def _run(argv: list[str], timeout: float = 10.0) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:g}s"
    except OSError as exc:
        return 127, "", exc.strerror or str(exc)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _version_tuple(text: str) -> tuple[int, ...]:
    digits = "".join(c if c.isdigit() or c == "." else " " for c in text).split()
    return tuple(int(p) for p in digits[0].split(".") if p) if digits else ()


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check(
        "python",
        "ok" if ok else "error",
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.system()} {platform.machine()} ({sys.executable})",
        None if ok else "everything: Python 3.11 or newer is required",
        required=True,
    )


def check_torch() -> list[Check]:
    try:
        import torch
    except Exception as exc:  # a broken install raises more than ImportError
        return [
            Check(
                "torch",
                "error",
                f"cannot import torch: {exc}",
                "the embedded engine, kernels and training",
                required=True,
            )
        ]
    threads = f"{torch.get_num_threads()} threads, {torch.get_num_interop_threads()} interop"
    checks = [Check("torch", "ok", f"{torch.__version__} ({threads})", required=True)]
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        checks.append(Check("cuda", "ok", f"CUDA {torch.version.cuda}: {names}"))
    else:
        checks.append(
            Check(
                "cuda",
                "missing",
                "no CUDA device",
                "GPU serving and fast kernels; CPU reference paths are used",
            )
        )
    gpu_extra = [m for m in ("sglang", "flashinfer") if importlib.util.find_spec(m)]
    complete = len(gpu_extra) == 2
    checks.append(
        Check(
            "gpu extra",
            "ok" if complete else "missing",
            f"installed: {', '.join(gpu_extra)}"
            if gpu_extra
            else "sglang and flashinfer not installed",
            None if complete else "the sglang backend (install the `gpu` extra on a GPU host)",
        )
    )
    return checks


def check_sandbox(settings: Settings) -> list[Check]:
    """The sandbox commands get, and the resource limits they run under in it."""
    works, detail = probe_bubblewrap()
    if works:
        keyrings = "keyrings closed" if keyring_filter() is not None else "keyrings open"
        sandbox = Check(
            "sandbox",
            "ok",
            f"{detail}: starts ({settings.tools.sandbox.view} view: read-only root, no "
            f"network, private /tmp, /run emptied, homes hidden, .git read-only, {keyrings})",
        )
    else:
        fallback = "isolated commands: the terminal tool falls back to a weaker sandbox"
        status: Status = "missing" if find_program("bwrap") is None else "error"
        sandbox = Check("sandbox", status, f"bubblewrap cannot start a sandbox: {detail}", fallback)
    return [sandbox, check_limits(ResourceLimits(settings.tools.sandbox, user_namespace=works))]


def check_limits(limits: ResourceLimits) -> Check:
    """ok when a cgroup holds each command's processes and memory (reaching a limit kills the
    command); warn when rlimits stand in or a limit is not enforced, saying why."""
    problems = limits.problems()
    return Check(
        "limits", "warn" if problems else "ok", limits.summary(), "; ".join(problems) or None
    )


def check_program(
    name: str, program: str, disables: str, minimum: tuple[int, ...] | None = None
) -> Check:
    path = find_program(program)
    if path is None:
        return Check(name, "missing", f"{program} not found", disables)
    code, out, err = _run([str(path), "--version"])
    version = _first_line(out or err)
    if code != 0:
        return Check(name, "error", f"{path} --version failed: {_first_line(err)}", disables)
    if minimum and _version_tuple(version) < minimum:
        wanted = ".".join(map(str, minimum))
        return Check(name, "warn", f"{version} at {path} is older than {wanted}", disables)
    return Check(name, "ok", f"{version} ({path})")


def check_home(settings: Settings) -> Check:
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=home, prefix=".doctor-") as scratch:
            db = sqlite3.connect(Path(scratch) / "probe.db")
            try:
                mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            finally:
                db.close()
    except (OSError, sqlite3.Error) as exc:
        return Check(
            "data folder", "error", f"{home}: {exc}", "traces, checkpoints and logs", required=True
        )
    if mode.lower() != "wal":
        return Check(
            "data folder",
            "warn",
            f"{home}: SQLite refused WAL (got {mode})",
            "concurrent trace writers",
        )
    return Check(
        "data folder",
        "ok",
        f"{home} writable; SQLite {sqlite3.sqlite_version} (WAL)",
        required=True,
    )


def check_models(settings: Settings) -> Check:
    folder = settings.models_dir
    found = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    if not found:
        return Check(
            "local models", "missing", f"none in {folder}", "serving a model from this machine"
        )
    return Check("local models", "ok", f"{', '.join(found)} in {folder}")


async def check_engine(settings: Settings) -> Check:
    from opencomposer.serving.engines import make_engine
    from opencomposer.serving.engines.errors import EngineError

    engine_settings = settings.engine.model_copy(
        update={
            "max_retries": 0,
            "connect_timeout": _ENGINE_PROBE_TIMEOUT,
            "idle_timeout": _ENGINE_PROBE_TIMEOUT,
        }
    )
    backend = settings.engine.backend
    where = (
        f"{backend} backend at {settings.engine.base_url}"
        if backend == "openai"
        else f"{backend} backend"
    )
    engine = make_engine(engine_settings, settings.models_dir)
    try:
        models = await engine.models()
    except EngineError as exc:
        fix = (
            "set engine.base_url to a running server" if backend == "openai" else "see the message"
        )
        return Check("engine", "error", exc.message, f"chat and agent turns ({fix})")
    finally:
        await engine.aclose()
    served = ", ".join(_model_line(m, settings) for m in models) or "no models"
    return Check("engine", "ok", f"{where} serves {served}")


def _model_line(model: "ModelInfo", settings: Settings) -> str:
    """A served model with the window agent turns will assume and the step cap it gives."""
    from opencomposer.agent.session import DEFAULT_CONTEXT_WINDOW
    from opencomposer.agent.tokens import step_token_cap

    window = settings.agent.context_window or model.context_window
    said = (
        f"{window:,}-token window"
        if window
        else (f"window not reported, {DEFAULT_CONTEXT_WINDOW:,} tokens assumed")
    )
    cap = step_token_cap(window or DEFAULT_CONTEXT_WINDOW, settings.agent.max_step_tokens)
    return f"{model.id} ({said}; agent steps stop at {cap:,} tokens)"


def check_server_auth(settings: Settings) -> Check:
    """Who may call `opencomposer serve` as it is configured."""
    # Imported here: it brings the web stack, which `doctor` needs for nothing else.
    from opencomposer.serving.http.origin import is_loopback

    server = settings.server
    if server.auth == "none":
        if not is_loopback(server.host):
            return Check(
                "http auth",
                "error",
                f'server.auth = "none" with host {server.host}: serve refuses to start',
                "opencomposer serve",
            )
        return Check(
            "http auth",
            "warn",
            'server.auth = "none": any program on this machine '
            "can drive the agent through the HTTP server",
        )
    where = "server.token" if server.token else f"{settings.home / 'server-token'}"
    return Check(
        "http auth",
        "ok",
        f"bearer token required, on loopback too ({where}); Host and Origin checked",
    )


def check_config(loaded: LoadedSettings) -> Check:
    files = ", ".join(map(str, loaded.files)) or "none (defaults and environment only)"
    return Check("config", "ok", f"files: {files}", required=True)


async def run_doctor(
    workspace: Path | None = None, overrides: dict[str, Any] | None = None
) -> Report:
    """Run every check; a broken config is reported as a failed check, not raised."""
    try:
        loaded = load_settings(workspace, overrides)
        config = check_config(loaded)
    except ConfigError as exc:
        loaded = LoadedSettings(settings=Settings.model_validate({}))
        config = Check(
            "config", "error", str(exc), "your settings: defaults are used", required=True
        )
    settings = loaded.settings
    blocking: list[Callable[[], Check | list[Check]]] = [
        check_python,
        check_torch,
        lambda: check_sandbox(settings),
        lambda: check_program("ripgrep", "rg", "the grep tool and fast file listing"),
        lambda: check_program("git", "git", "workspace facts and checkpoints"),
        lambda: check_program(
            "slirp4netns",
            "slirp4netns",
            "isolated networks (bench tasks allowed the internet; tools.sandbox.network)",
        ),
        lambda: check_program("neovim", "nvim", "the Neovim plugin and its tests", MIN_NEOVIM),
        lambda: check_program("node", "node", "building the VS Code extension", (MIN_NODE,)),
        lambda: check_home(settings),
        lambda: check_models(settings),
        lambda: check_server_auth(settings),
    ]
    pending: list[Awaitable[Check | list[Check]]] = [asyncio.to_thread(f) for f in blocking]
    pending.append(check_engine(settings))
    checks: list[Check] = [config]
    for result in await asyncio.gather(*pending):
        checks.extend(result if isinstance(result, list) else [result])
    return Report(checks=checks, settings=loaded)
