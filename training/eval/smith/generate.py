"""Tasks made by breaking real projects, the SWE-smith way: each pinned sdist is unpacked, its
own tests run twice to know which pass reliably, then procedural mutations of its code are
tried one at a time in the sandbox. A mutation is kept only when some of those tests now fail
and others still pass; FAIL_TO_PASS and PASS_TO_PASS are what the runs said. Kept mutations in
different places are then combined into harder tasks (a bug in each of several files), kept
only when every part still breaks a test of its own.

The same seed over the same sdists gives the same suite.
"""

import asyncio
import hashlib
import itertools
import random
import shutil
import statistics
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from opencomposer.training.errors import TrainingError
from opencomposer.training.eval.smith.issue import write_instruction
from opencomposer.training.eval.smith.mutations import (
    KINDS,
    Mutation,
    apply_mutations,
    find_mutations,
)
from opencomposer.training.eval.smith.packages import SourcePackage, fetch_sdist, unpack_sdist
from opencomposer.training.eval.smith.testrun import TestRun, run_tests, test_command
from opencomposer.training.eval.smith.writer import PLANTED_PATHS, GeneratedTask, write_task

MAX_FAILING_SHARE = 0.5
"""A mutation failing more of the suite than this breaks the import, not a behaviour."""


@dataclass(frozen=True)
class GenerateOptions:
    per_package: int = 8
    """Single-mutation tasks per package."""

    combined: int = 3
    """Tasks per package combining two or three kept mutations."""

    tries_per_task: int = 8
    """Candidates tried per task wanted before a package gives up."""

    seed: int = 0
    concurrency: int = 2


@dataclass
class PackageReport:
    package: str
    tried: int = 0
    kept: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    baseline_tests: int = 0
    baseline_seconds: float = 0.0

    def reject(self, why: str) -> None:
        self.rejected[why] = self.rejected.get(why, 0) + 1


@dataclass
class _Kept:
    mutations: list[Mutation]
    broken: dict[str, str]
    """The mutated files' text, by path."""

    run: TestRun
    fail_to_pass: list[str]
    pass_to_pass: list[str]


class SmithGenerator:
    def __init__(
        self,
        out: Path,
        *,
        cache: Path,
        data_dir: Path,
        options: GenerateOptions,
        progress: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.out, self.cache, self.data_dir = out, cache, data_dir
        self.options = options
        self.progress = progress
        self.work = cache / "work"
        self.limit = asyncio.Semaphore(options.concurrency)

    async def generate(self, packages: Iterable[SourcePackage]) -> list[PackageReport]:
        """The suite, written afresh: tasks an earlier run left in the folder are removed."""
        _prepare(self.out)
        self.work.mkdir(parents=True, exist_ok=True)
        return [await self._package(package) for package in packages]

    async def _package(self, package: SourcePackage) -> PackageReport:
        report = PackageReport(package.folder)
        tree = unpack_sdist(
            fetch_sdist(package, self.cache), package, self.work / f"{package.folder}-pristine"
        )
        stable, seconds = await self._baseline(package, tree)
        report.baseline_tests, report.baseline_seconds = len(stable), seconds
        timeout = max(60.0, 10 * seconds)
        sources = _source_files(tree, package)
        if not sources:
            raise TrainingError(f"{package.folder} has no Python source at {package.package}")
        candidates = _interleaved(
            [m for path, text in sources.items() for m in find_mutations(path, text)],
            random.Random(f"{self.options.seed}:{package.folder}"),
        )
        kept: list[_Kept] = []
        budget = self.options.per_package * self.options.tries_per_task
        for start in range(0, min(budget, len(candidates)), self.options.concurrency):
            if len(kept) >= self.options.per_package:
                break
            batch = candidates[start : start + self.options.concurrency]
            runs = await asyncio.gather(
                *(self._try(package, tree, sources, [m], stable, timeout) for m in batch)
            )
            for mutation, (outcome, why) in zip(batch, runs, strict=True):
                report.tried += 1
                if outcome is None:
                    report.reject(why)
                elif len(kept) < self.options.per_package:
                    kept.append(outcome)
                    self._write(package, tree, outcome, timeout)
                    report.kept += 1
                    self.progress(
                        f"{package.folder}: kept {mutation.kind} at {mutation.path}:{mutation.line}"
                    )
        await self._combine(package, tree, sources, kept, stable, timeout, report)
        return report

    async def _baseline(self, package: SourcePackage, tree: Path) -> tuple[set[str], float]:
        """Tests that passed in two runs of the untouched tree, and one run's seconds."""
        runs = [await self._run(package, tree, {}, 600.0) for _ in range(2)]
        stable = runs[0].passing() & runs[1].passing()
        if not stable:
            tail = runs[0].output[-1500:].strip()
            raise TrainingError(f"{package.folder}: no test passes in the sandbox: {tail}")
        return stable, max(run.seconds for run in runs)

    async def _run(
        self, package: SourcePackage, tree: Path, files: dict[str, str], timeout: float
    ) -> TestRun:
        async with self.limit:
            return await run_tests(
                package, tree, files, scratch=self.work, data_dir=self.data_dir, timeout=timeout
            )

    async def _try(
        self,
        package: SourcePackage,
        tree: Path,
        sources: dict[str, str],
        mutations: list[Mutation],
        stable: set[str],
        timeout: float,
    ) -> tuple[_Kept | None, str]:
        broken = _broken_files(sources, mutations)
        run = await self._run(package, tree, broken, timeout)
        if run.exit_code is None:
            return None, "tests hung"
        fail_to_pass = sorted(stable & run.failing())
        pass_to_pass = sorted(stable & run.passing())
        if not fail_to_pass:
            return None, "no test failed"
        if len(fail_to_pass) > MAX_FAILING_SHARE * len(stable):
            return None, "most of the suite failed"
        if not pass_to_pass:
            return None, "no test still passed"
        return _Kept(mutations, broken, run, fail_to_pass, pass_to_pass), ""

    async def _combine(
        self,
        package: SourcePackage,
        tree: Path,
        sources: dict[str, str],
        kept: list[_Kept],
        stable: set[str],
        timeout: float,
        report: PackageReport,
    ) -> None:
        """Up to `combined` tasks of two or three kept bugs each, in as many files as there
        are: every part must still break some test of its own in the mix."""
        rng = random.Random(f"{self.options.seed}:{package.folder}:combined")
        made = 0
        for group in _groups(kept, rng, self.options.combined * self.options.tries_per_task):
            if made >= self.options.combined:
                break
            mutations = [m for part in group for m in part.mutations]
            outcome, why = await self._try(package, tree, sources, mutations, stable, timeout)
            report.tried += 1
            if outcome is not None and not all(
                set(part.fail_to_pass) & set(outcome.fail_to_pass) for part in group
            ):
                outcome, why = None, "a part fixed no test of its own in the mix"
            if outcome is None:
                report.reject(why)
                continue
            self._write(package, tree, outcome, timeout)
            report.kept += 1
            made += 1

    def _write(self, package: SourcePackage, tree: Path, kept: _Kept, timeout: float) -> None:
        name = _task_name(package, kept.mutations)
        task = GeneratedTask(
            name=name,
            instruction=write_instruction(
                package.name, kept.fail_to_pass, kept.run.output, _hidden_names(sorted(kept.broken))
            ),
            tree=tree,
            broken=kept.broken,
            fail_to_pass=kept.fail_to_pass,
            pass_to_pass=kept.pass_to_pass,
            test_command=test_command(package),
            protected=[*(_protected(test) for test in package.tests), *PLANTED_PATHS],
            verifier_timeout=timeout,
            difficulty=("easy", "medium", "hard")[min(len(kept.mutations), 3) - 1],
            metadata={
                "tags": ["swe-smith", package.name, *sorted({m.kind for m in kept.mutations})],
                "source": f"{package.name}=={package.version} (sdist)",
                "license": package.license,
                "mutations": [f"{m.kind} at {m.path}:{m.line}" for m in kept.mutations],
            },
        )
        write_task(task, self.out, repo=package.repo, instance_id=name)


SUMMARY = "generated.json"
"""Written beside the tasks: what each package gave, and the suite's distribution."""


def _prepare(out: Path) -> None:
    """`out` empty, or a generated suite whose tasks are removed; anything else is refused
    (a folder of the user's is never cleared)."""
    if out.exists() and any(out.iterdir()):
        if not (out / SUMMARY).is_file():
            raise TrainingError(f"{out} is not empty and holds no generated suite: choose another")
        for folder in out.glob("smith-*"):
            if (folder / "task.toml").is_file():
                shutil.rmtree(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY).touch()


def _source_files(tree: Path, package: SourcePackage) -> dict[str, str]:
    """The package's modules (relative path: text), tests and non-UTF-8 files left out."""
    root = tree / package.package
    paths = [root] if root.is_file() else sorted(root.rglob("*.py"))
    files = {}
    for path in paths:
        relative = path.relative_to(tree).as_posix()
        parts = set(relative.split("/"))
        if parts & {"tests", "test", "testing"} or path.name.startswith(("test_", "conftest")):
            continue
        try:
            files[relative] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return files


def _interleaved(mutations: list[Mutation], rng: random.Random) -> list[Mutation]:
    """The candidates shuffled, then taken a kind at a time in turn, so a package's tasks
    span the kinds instead of being mostly off-by-ones."""
    by_kind: dict[str, list[Mutation]] = {kind: [] for kind in KINDS}
    for mutation in mutations:
        by_kind[mutation.kind].append(mutation)
    queues = [rng.sample(found, len(found)) for found in by_kind.values() if found]
    rng.shuffle(queues)
    order = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop())
    return order


def _groups(kept: list[_Kept], rng: random.Random, tries: int) -> list[list[_Kept]]:
    """Groups of two or three kept bugs whose edits do not overlap, preferring different
    files."""
    groups: list[list[_Kept]] = []
    seen: set[tuple[str, ...]] = set()
    for _ in range(tries * 4):
        if len(groups) >= tries or len(kept) < 2:
            break
        group = rng.sample(kept, min(len(kept), rng.choice((2, 3))))
        mutations = [m for part in group for m in part.mutations]
        keys = tuple(sorted(m.key for m in mutations))
        if keys in seen or _overlapping(mutations):
            continue
        seen.add(keys)
        groups.append(group)
    return sorted(groups, key=lambda g: -len({path for part in g for path in part.broken}))


def _overlapping(mutations: list[Mutation]) -> bool:
    spans = sorted((m.path, m.start, m.end) for m in mutations)
    return any(a[0] == b[0] and (b[1] < a[2] or a[1] == b[1]) for a, b in itertools.pairwise(spans))


def _broken_files(sources: dict[str, str], mutations: list[Mutation]) -> dict[str, str]:
    paths = sorted({m.path for m in mutations})
    return {
        path: apply_mutations(sources[path], [m for m in mutations if m.path == path])
        for path in paths
    }


def _task_name(package: SourcePackage, mutations: list[Mutation]) -> str:
    digest = hashlib.sha256("\n".join(sorted(m.key + m.replacement for m in mutations)).encode())
    return f"smith-{package.name}-{digest.hexdigest()[:10]}"


def _hidden_names(files: list[str]) -> list[str]:
    """Every way the instruction could name a broken file: its path, tail and module."""
    names = []
    for relative in files:
        parts = relative.split("/")
        names += ["/".join(parts[i:]) for i in range(len(parts))]
        module = relative.removeprefix("src/").removesuffix(".py").removesuffix("/__init__")
        if "/" in module:  # a top-level module's name is the project's own
            names.append(module.replace("/", "."))
    return names


def _protected(test: str) -> str:
    return test if test.endswith(".py") else f"{test}/*"


def distribution(out: Path) -> dict[str, float | int]:
    """Medians (and extremes) of the generated suite's oracle diffs, read from the tasks."""
    rows = []
    for toml in sorted(out.glob("*/task.toml")):
        metadata = tomllib.loads(toml.read_text(encoding="utf-8")).get("metadata", {})
        if "lines_changed" in metadata:
            rows.append(metadata)
    if not rows:
        return {"tasks": 0}
    column = {
        key: [row[key] for row in rows]
        for key in ("lines_changed", "files_touched", "tests_failing")
    }
    return {
        "tasks": len(rows),
        **{f"median_{key}": statistics.median(values) for key, values in column.items()},
        **{f"max_{key}": max(values) for key, values in column.items()},
        "multi_file_tasks": sum(1 for value in column["files_touched"] if value > 1),
    }
