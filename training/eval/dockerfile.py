"""A Harbor / Terminal-Bench 2.x task's `environment/Dockerfile`, read to be built without a
container runtime: on this host's toolchain, in the bench's sandbox.

What can be honoured is: `WORKDIR` (the trial's workspace is shown there, /app when unset),
`COPY` and `ADD` of the build context's files into it, `ENV` and `ARG` (applied to the build,
the oracle and the verifier), `RUN` (run in the sandbox, in order, network as the task says)
and `SHELL`. Package installs (`apt-get`, `apk`, `dnf`/`yum`, `pip`) cannot change this host's
read-only system: a RUN that only installs packages this host already has is skipped, and one
that needs a package the host lacks makes the task unrunnable here, naming the packages. What
only a container runtime can do is said plainly, as a problem (the task is refused) or a
warning (it runs, differently): a multi-stage build, a COPY outside the WORKDIR, a `FROM`
image whose toolchain this host lacks (problem) or has at another version (warning).
Instructions about running a container (`CMD`, `ENTRYPOINT`, `EXPOSE`, `LABEL`, ...) do not
change the files and are ignored; `USER` is noted (commands run as the bench's user).
"""

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from opencomposer.training.errors import TrainingError

DEFAULT_WORKDIR = PurePosixPath("/app")
_INSTALL = (
    "tasks with an environment/Dockerfile need dockerfile-parse: pip install 'opencomposer[bench]'"
)
# Instructions about the running container, not its files.
_IGNORED = {"CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "HEALTHCHECK", "STOPSIGNAL", "VOLUME",
            "MAINTAINER", "ONBUILD"}  # fmt: skip
# Toolchain images: the command that says this host's version.
_TOOLCHAINS = {
    "python": [sys.executable, "--version"],
    "node": ["node", "--version"],
    "golang": ["go", "version"],
    "rust": ["rustc", "--version"],
    "openjdk": ["java", "-version"],
    "eclipse-temurin": ["java", "-version"],
    "ruby": ["ruby", "--version"],
}


@dataclass(frozen=True)
class CopyStep:
    line: int
    sources: list[str]
    """Relative to the build context (environment/); globs allowed."""

    destination: PurePosixPath
    """Absolute, in the image; under the WORKDIR."""

    folder: bool
    """The destination was written as a folder (a trailing slash, `.`)."""


@dataclass(frozen=True)
class RunStep:
    line: int
    argv: list[str]
    """What runs: the SHELL with the command, or the exec form's words."""

    workdir: PurePosixPath
    env: dict[str, str]
    """The ENV in force at this step (what it adds to the sandbox's environment)."""


@dataclass
class DockerBuild:
    image: str | None = None
    workdir: PurePosixPath = DEFAULT_WORKDIR
    env: dict[str, str] = field(default_factory=dict)
    """The final ENV: what the oracle and the verifier run with."""

    steps: list[CopyStep | RunStep] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_dockerfile(path: Path) -> DockerBuild:
    """The build `path` describes, with what cannot be honoured here in `problems`."""
    try:
        from dockerfile_parse import DockerfileParser
        from dockerfile_parse.util import WordSplitter, extract_key_values
    except ImportError as exc:
        raise TrainingError(f"{_INSTALL} ({exc})") from None
    build = DockerBuild()
    env: dict[str, str] = {}
    args: dict[str, str] = {}
    shell = ["/bin/sh", "-c"]
    workdir = PurePosixPath("/")
    stages = 0
    try:
        instructions = DockerfileParser(path=str(path.parent), env_replace=False).structure
    except (OSError, ValueError) as exc:
        build.problems.append(f"environment/Dockerfile cannot be read: {exc}")
        return build
    for instruction in instructions:
        name, value = instruction["instruction"], instruction["value"]
        line = instruction["startline"] + 1
        where = f"environment/Dockerfile line {line}: {name}"

        def words(text: str) -> list[str]:
            return list(WordSplitter(text, args=args, envs=env).split())

        if name == "FROM":
            stages += 1
            build.image = words(value)[0] if value.strip() else None
            if stages > 1:
                build.problems.append(f"{where}: a multi-stage build needs a container runtime")
        elif name == "ARG":
            for key, default in extract_key_values(True, args, env, _with_equals(value)):
                args.setdefault(key, default)
        elif name == "ENV":
            for key, text in extract_key_values(True, args, {**_base_env(), **env}, value):
                env[key] = text
        elif name == "WORKDIR":
            workdir = workdir / words(value)[0]
        elif name == "SHELL":
            shell = json.loads(value)
        elif name in ("COPY", "ADD"):
            step = _copy(name, value, line, workdir, words, build.problems, where)
            if step is not None:
                build.steps.append(step)
        elif name == "RUN":
            argv = json.loads(value) if value.lstrip().startswith("[") else [*shell, value]
            build.steps.append(RunStep(line, argv, workdir, dict(env)))
        elif name == "USER":
            build.warnings.append(f"{where} {value}: commands run as the bench's user")
        elif name not in _IGNORED:
            build.warnings.append(f"{where}: not understood here (ignored)")
    build.workdir = workdir if workdir != PurePosixPath("/") else DEFAULT_WORKDIR
    build.env = env
    _check_destinations(build)
    _check_packages(build)
    _check_image(build)
    return build


def _with_equals(value: str) -> str:
    """`ARG NAME` declares NAME without a default: as `NAME=` for the key/value reader."""
    return " ".join(word if "=" in word else f"{word}=" for word in value.split())


def _base_env() -> dict[str, str]:
    """What `$PATH` and friends mean in an ENV line: the sandbox's environment here."""
    return {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}


def _copy(
    name: str,
    value: str,
    line: int,
    workdir: PurePosixPath,
    words: Callable[[str], list[str]],
    problems: list[str],
    where: str,
) -> CopyStep | None:
    parts = json.loads(value) if value.lstrip().startswith("[") else words(value)
    flags = [part for part in parts if part.startswith("--")]
    parts = [part for part in parts if not part.startswith("--")]
    if any(flag.startswith("--from") for flag in flags):
        problems.append(f"{where} --from: a multi-stage build needs a container runtime")
        return None
    if len(parts) < 2:
        problems.append(f"{where}: needs a source and a destination")
        return None
    *sources, destination = parts
    if name == "ADD" and any(re.match(r"[a-z]+://", source) for source in sources):
        problems.append(f"{where} of a URL: fetch it in a RUN step instead")
        return None
    folder = destination.endswith("/") or destination in (".", "./")
    return CopyStep(line, sources, workdir / destination, folder)


def _check_destinations(build: DockerBuild) -> None:
    for step in build.steps:
        if isinstance(step, CopyStep) and not step.destination.is_relative_to(build.workdir):
            build.problems.append(
                f"environment/Dockerfile line {step.line}: COPY to {step.destination}: only "
                f"copies into the WORKDIR ({build.workdir}) can be made without a container "
                "runtime"
            )


# `apt-get install`, `apk add`, `pip install` and the rest: the manager, then its packages.
_SYSTEM_MANAGERS = {"apt-get": "install", "apt": "install", "apk": "add", "dnf": "install",
                    "yum": "install", "microdnf": "install"}  # fmt: skip
_PACKAGE_CHORES = {"update", "upgrade", "clean", "autoremove", "autoclean", "cache"}
_PIP = {"pip", "pip3", "pip3.11", "python -m pip", "python3 -m pip", "uv pip"}


def _check_packages(build: DockerBuild) -> None:
    """A RUN that installs packages: skipped when this host has them all (its other
    commands still run), the task refused when it lacks some."""
    kept: list[CopyStep | RunStep] = []
    for step in build.steps:
        if not isinstance(step, RunStep) or step.argv[-2:-1] != ["-c"]:
            kept.append(step)
            continue
        commands, missing, installed = [], [], []
        for command in _commands(step.argv[-1]):
            packages = _installs(command)
            if packages is None:
                commands.append(command)
                continue
            installed.append(command)
            missing += [package for package in packages if not _present(package, command)]
        if missing:
            build.problems.append(
                f"environment/Dockerfile line {step.line}: RUN installs {', '.join(missing)}, "
                "which this host lacks; installing packages needs a container runtime (or "
                "install them on this host)"
            )
        if installed:
            build.warnings.append(
                f"environment/Dockerfile line {step.line}: skipped "
                + "; ".join(installed)
                + " (this host has the packages)"
            )
        if commands:
            argv = [*step.argv[:-1], " && ".join(commands)]
            kept.append(RunStep(step.line, argv, step.workdir, step.env))
    build.steps = kept


def _commands(script: str) -> list[str]:
    """A RUN's commands joined by `&&` or `;`, as text (quotes kept)."""
    return [part.strip() for part in re.split(r"\s*(?:&&|;)\s*", script) if part.strip()]


def _installs(command: str) -> list[str] | None:
    """The packages a package-manager command installs (empty for its chores: update,
    clean, removing apt's lists), or None when it is no package command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    words = [word for word in words if not re.fullmatch(r"[A-Z_]+=\S*", word)]  # VAR=x cmd
    if words[:1] == ["sudo"]:
        words = words[1:]
    if not words:
        return None
    if words[:2] == ["rm", "-rf"] and all(_package_cache(word) for word in words[2:]):
        return []
    joined = " ".join(words[:3])
    for pip in _PIP:
        if (joined + " ").startswith(pip + " install "):
            rest = words[len(pip.split()) + 1 :]
            return [word for word in rest if not word.startswith("-")]
    verb = _SYSTEM_MANAGERS.get(words[0])
    if verb is None:
        return None
    action = next((word for word in words[1:] if not word.startswith("-")), "")
    if action in _PACKAGE_CHORES:
        return []
    if action != verb:
        return None
    return [word for word in words[words.index(action) + 1 :] if not word.startswith("-")]


def _package_cache(path: str) -> bool:
    return path.startswith(("/var/lib/apt", "/var/cache", "/tmp/", "~/.cache", "/root/.cache"))


def _present(package: str, command: str) -> bool:
    if "pip" in shlex.split(command)[:3]:
        name = re.split(r"[<>=!~\[; ]", package, maxsplit=1)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return False
        return True
    name = package.split("=", 1)[0]
    dpkg = shutil.which("dpkg-query")
    if dpkg is None:
        return False
    done = subprocess.run(
        [dpkg, "-W", "-f=${Status}", name], capture_output=True, text=True, check=False
    )
    return done.stdout.endswith("installed")


def _check_image(build: DockerBuild) -> None:
    """A toolchain image this host lacks is a problem; one at another version, a warning."""
    if build.image is None:
        return
    last = build.image.split("/")[-1]
    family, _, tag = last.partition(":")
    command = _TOOLCHAINS.get(family)
    if command is None:
        build.warnings.append(f"FROM {build.image}: built on this host's system instead")
        return
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
        found = (done.stdout + done.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        found = ""
    if not found:
        build.problems.append(
            f"FROM {build.image}: this host has no {family} ({command[0]}); the task needs a "
            "container runtime or the toolchain installed here"
        )
        return
    wanted = re.match(r"v?(\d+(?:\.\d+)?)", tag)
    have = re.search(r"(\d+\.\d+)", found)
    if wanted and have and not (have.group(1) + ".").startswith(wanted.group(1) + "."):
        build.warnings.append(
            f"FROM {build.image}: built and tested with this host's {family} {have.group(1)}"
        )


def copy_into(step: CopyStep, context: Path, workspace: Path, workdir: PurePosixPath) -> None:
    """One COPY: the context's matching files into the workspace, where `workdir` is shown.
    Docker's rules: a folder's contents are copied, not the folder; several sources or a
    destination ending in / make the destination a folder. Sources outside the context are
    refused."""
    context = context.resolve()
    matched: list[Path] = []
    for source in step.sources:
        relative_source = source.lstrip("/")
        globbed = any(char in source for char in "*?[")
        found = sorted(context.glob(relative_source)) if globbed else [context / relative_source]
        for path in found:
            if not os.path.lexists(path) or not path.resolve().is_relative_to(context):
                raise TrainingError(
                    f"environment/Dockerfile line {step.line}: COPY {source}: no such file in "
                    "the build context"
                )
            matched.append(path)
    target = workspace / step.destination.relative_to(workdir)
    into_folder = step.folder or len(matched) > 1 or target.is_dir()
    for path in matched:
        if path.is_dir() and not path.is_symlink():
            shutil.copytree(path, target, symlinks=True, dirs_exist_ok=True)
        else:
            destination = target / path.name if into_folder else target
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination, follow_symlinks=False)
