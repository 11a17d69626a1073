"""A package's own tests run in the bench's sandbox over one version of its tree, read back
by the same SWE-bench parser the grader uses: the ids a generated task records are the ids its
verifier's log will give."""

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from opencomposer.agent.tools.sandbox import Mount
from opencomposer.training.eval.grading import TestOutcomes, test_outcomes
from opencomposer.training.eval.sandboxed import run_script
from opencomposer.training.eval.smith.packages import SourcePackage

_FAILING = {"FAILED", "ERROR"}


def test_command(package: SourcePackage) -> str:
    """The tests, run from /app as the verifier runs them: `-rA` names every test with its
    outcome (what SWE-bench's parser reads), the project's own addopts are dropped (coverage
    plugins the image does not have), no cache or bytecode is written into the repository,
    and PYTHONPATH is added to (the verifier's exit guard is found through it)."""
    tests = " ".join(package.tests)
    return (
        f"cd /app && PYTHONPATH=/app/{package.import_root}${{PYTHONPATH:+:$PYTHONPATH}} "
        "PYTHONDONTWRITEBYTECODE=1 "
        f"python -m pytest -rA -q --tb=short -p no:cacheprovider -o addopts= {tests}"
    )


@dataclass(frozen=True)
class TestRun:
    outcomes: TestOutcomes
    output: str
    exit_code: int | None
    seconds: float

    def passing(self) -> set[str]:
        return self._having({"PASSED"})

    def failing(self) -> set[str]:
        return self._having(_FAILING)

    def _having(self, statuses: set[str]) -> set[str]:
        ambiguous = self.outcomes.ambiguous
        return {t for t, s in self.outcomes.status.items() if s in statuses and t not in ambiguous}


async def run_tests(
    package: SourcePackage,
    tree: Path,
    files: dict[str, str],
    *,
    scratch: Path,
    data_dir: Path,
    timeout: float,
) -> TestRun:
    """The tests over a copy of `tree` with `files` (path relative to it: new text) written
    in, in a sandbox; the copy is removed afterwards."""
    with tempfile.TemporaryDirectory(dir=scratch, prefix=f"{package.name}-") as folder:
        app = Path(folder, "app")
        shutil.copytree(tree, app, symlinks=True)
        for relative, text in files.items():
            (app / relative).write_text(text, encoding="utf-8")
        run = await run_script(
            test_command(package),
            workspace=app,
            mounts=[Mount(app, Path("/app"), writable=True)],
            data_dir=data_dir,
            hidden=[],
            timeout=timeout,
        )
    return TestRun(test_outcomes(run.output), run.output, run.exit_code, run.seconds)
