"""A benchmark task in Harbor's format (Terminal-Bench 2.x), loaded and checked.

```
instruction.md        what the agent is told, and nothing else
task.toml             metadata (category, difficulty, tags), [agent] and [verifier] timeouts,
                      [environment] resources and the network flag
environment/          app/ (the starting files, /app in Harbor) and setup.sh (optional: run
                      in app/ to finish the repository), our own tasks' form; or a
                      Dockerfile alone, Harbor's, built here without a container runtime
                      (`dockerfile`)
tests/test.sh         the verifier: copied in only after the agent is done; its exit status
                      and /logs/verifier/reward.txt (or reward.json) give the reward
solution/solve.sh     the oracle, run in the starting repository
```

Keys Harbor knows are read with Harbor's meaning; keys it does not know are ignored, as Harbor
ignores them, and named as warnings. Two keys are ours and Harbor ignores them:
`[verifier] protected_paths` (globs restored to their starting state before the tests run, so
an agent cannot pass by editing the tests or planting a conftest.py) and `[verifier] grader =
"swebench"` (tests/config.json names FAIL_TO_PASS and PASS_TO_PASS; the test output is graded
with SWE-bench's rules instead of trusting a reward file).
"""

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.dockerfile import DEFAULT_WORKDIR, DockerBuild, read_dockerfile

CATEGORIES = (
    "bug-fix",
    "feature",
    "refactor",
    "debugging",
    "data-analysis",
    "testing",
    "docs",
)
"""The report's CursorBench categories; a task may name another (it is reported on its own)."""

BUILTIN_TASKS = Path(__file__).parent / "tasks"
"""The suite that ships with the bench (`bench list` and `bench run` without task folders)."""


class TaskError(TrainingError):
    """A task folder that cannot be run: every problem found, one per line."""

    def __init__(self, task: Path, problems: list[str]) -> None:
        self.task = task
        self.problems = problems
        super().__init__(f"task {task}: " + "; ".join(problems))


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow")

    def unknown_keys(self, prefix: str) -> list[str]:
        return [f"{prefix}.{key}" for key in (self.model_extra or {})]


class Metadata(_Section):
    """Arbitrary in Harbor; these are the keys the bench reads."""

    category: str = "general"
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    tags: list[str] = Field(default_factory=list)
    language: str | None = None

    def unknown_keys(self, prefix: str) -> list[str]:
        return []  # Harbor's metadata is free-form: authors, explanations, sources


class AgentPhase(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)


class VerifierPhase(_Section):
    timeout_sec: float = Field(default=600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    protected_paths: list[str] = Field(default_factory=list)
    grader: Literal["reward", "swebench"] = "reward"


class Environment(_Section):
    build_timeout_sec: float = Field(default=600.0, gt=0)
    cpus: float = Field(default=1, gt=0)
    memory_mb: int = Field(default=2048, ge=64)
    storage_mb: int = Field(default=10240, ge=1)
    allow_internet: bool = False
    """Off unless the task needs it (Harbor's default is on; ours is the sandbox's)."""

    docker_image: str | None = None


class Solution(_Section):
    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(_Section):
    version: str = "1.0"
    schema_version: str | None = None
    task: dict[str, Any] = Field(default_factory=dict)
    """Harbor 1.1's name, description and authors."""
    metadata: Metadata = Field(default_factory=Metadata)
    agent: AgentPhase = Field(default_factory=AgentPhase)
    verifier: VerifierPhase = Field(default_factory=VerifierPhase)
    environment: Environment = Field(default_factory=Environment)
    solution: Solution = Field(default_factory=Solution)
    source: str | None = None


class SWEBenchSpec(BaseModel):
    """tests/config.json of a task graded by SWE-bench's rules."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    fail_to_pass: list[str] = Field(alias="FAIL_TO_PASS", min_length=1)
    pass_to_pass: list[str] = Field(default_factory=list, alias="PASS_TO_PASS")
    log_parser: str = "parse_log_pytest"
    instance_id: str | None = None
    repo: str | None = None


@dataclass(frozen=True)
class Task:
    root: Path
    name: str
    instruction: str
    config: TaskConfig
    swebench: SWEBenchSpec | None = None
    warnings: list[str] = field(default_factory=list)
    docker: DockerBuild | None = None
    """The environment/Dockerfile's build, for a task that has no app/ or setup.sh."""

    @property
    def category(self) -> str:
        return self.config.metadata.category

    @property
    def workdir(self) -> PurePosixPath:
        """Where the scripts see the workspace: the Dockerfile's WORKDIR, else /app."""
        return self.docker.workdir if self.docker is not None else DEFAULT_WORKDIR

    @property
    def env(self) -> dict[str, str]:
        """The Dockerfile's ENV, for the oracle and the verifier."""
        return dict(self.docker.env) if self.docker is not None else {}

    @property
    def app_dir(self) -> Path:
        return self.root / "environment" / "app"

    @property
    def setup_script(self) -> Path:
        return self.root / "environment" / "setup.sh"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    @property
    def has_solution(self) -> bool:
        return (self.solution_dir / "solve.sh").is_file()


def load_task(root: Path) -> Task:
    """The task in `root`, checked whole: raises `TaskError` naming every problem at once."""
    root = root.resolve()
    problems: list[str] = []
    if not root.is_dir():
        raise TaskError(root, ["not a folder"])
    instruction = _instruction(root, problems)
    config, warnings = _config(root, problems)
    if not (root / "tests" / "test.sh").is_file():
        problems.append("tests/test.sh is missing (the verifier)")
    environment = root / "environment"
    docker = None
    if not environment.is_dir():
        problems.append("environment/ is missing")
    elif (environment / "app").is_dir() or (environment / "setup.sh").is_file():
        pass  # our own form; a Dockerfile beside it is for Harbor
    elif (environment / "Dockerfile").is_file():
        docker = read_dockerfile(environment / "Dockerfile")
        problems += docker.problems
        warnings += docker.warnings
    else:
        problems.append(
            "environment/ has neither app/ (the starting files), setup.sh nor a Dockerfile"
        )
    if not (root / "solution" / "solve.sh").is_file():
        warnings.append("no solution/solve.sh: the task cannot be oracle-checked")
    swebench = None
    if config is not None and config.verifier.grader == "swebench":
        swebench = _swebench_spec(root, problems)
    if problems or config is None:
        raise TaskError(root, problems)
    return Task(root, root.name, instruction, config, swebench, warnings, docker)


def _instruction(root: Path, problems: list[str]) -> str:
    path = root / "instruction.md"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.append("instruction.md is missing")
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"instruction.md cannot be read as UTF-8 text: {exc}")
        return ""
    if not text.strip():
        problems.append("instruction.md is empty")
    return text.strip()


def _config(root: Path, problems: list[str]) -> tuple[TaskConfig | None, list[str]]:
    path = root / "task.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append("task.toml is missing")
        return None, []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        problems.append(f"task.toml is not valid TOML: {exc}")
        return None, []
    try:
        config = TaskConfig.model_validate(data)
    except ValidationError as exc:
        problems += [f"task.toml: {_where(error)}: {error['msg']}" for error in exc.errors()]
        return None, []
    warnings = [f"task.toml: unknown key {key} (ignored)" for key in _unknown(config)]
    return config, warnings


def _unknown(config: TaskConfig) -> list[str]:
    keys = [key.removeprefix(".") for key in config.unknown_keys("")]
    for name in ("metadata", "agent", "verifier", "environment", "solution"):
        keys += getattr(config, name).unknown_keys(name)
    return keys


def _where(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"]) or "(top level)"


def _swebench_spec(root: Path, problems: list[str]) -> SWEBenchSpec | None:
    path = root / "tests" / "config.json"
    try:
        return SWEBenchSpec.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        problems.append('grader = "swebench" needs tests/config.json (FAIL_TO_PASS, PASS_TO_PASS)')
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"tests/config.json is not valid JSON: {exc}")
    except ValidationError as exc:
        problems += [f"tests/config.json: {_where(e)}: {e['msg']}" for e in exc.errors()]
    return None


def discover_tasks(roots: list[Path]) -> list[Path]:
    """Every task folder (one holding task.toml) under `roots`, sorted, each found once."""
    found: dict[Path, None] = {}
    for root in roots:
        if (root / "task.toml").is_file():
            found[root.resolve()] = None
            continue
        for toml in sorted(root.rglob("task.toml")):
            found[toml.parent.resolve()] = None
    return sorted(found)
