"""Grades the agent's tests by mutation: they must pass on the module as shipped (and on
behaviour-preserving rewrites of it), and fail on enough of the mutants in mutants/.

Each run gets a fresh copy of /app with the module under test replaced; the agent's own copy
of the module is never trusted. Writes /logs/verifier/reward.json and exits 0 only when the
reward is 1.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = Path(os.environ.get("MUTATION_APP", "/app"))
MODULE = "taskq/lifecycle.py"
TESTS = "tests/test_lifecycle.py"
ORIGINAL = HERE / "original" / "lifecycle.py"
THRESHOLD = 0.8
TIMEOUT = 60
LOGS = Path(os.environ.get("MUTATION_LOGS", "/logs/verifier"))


def run_with(module_source: Path) -> tuple[int, str]:
    """The agent's test file run with `module_source` as the module; (exit status, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "app"
        shutil.copytree(
            APP, work, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc")
        )
        shutil.copyfile(module_source, work / MODULE)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", TESTS],
                cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return 124, "timed out"
        return done.returncode, done.stdout[-3000:] + done.stderr[-2000:]


def main() -> int:
    result = {"reward": 0, "killed": 0, "mutants": 0}

    def finish(**extra) -> int:
        result.update(extra)
        LOGS.mkdir(parents=True, exist_ok=True)
        (LOGS / "reward.json").write_text(json.dumps(result))
        print(json.dumps(result, indent=2))
        return 0 if result["reward"] == 1 else 1

    if not (APP / TESTS).is_file():
        return finish(problem=f"{TESTS} does not exist")
    status, output = run_with(ORIGINAL)
    if status != 0:
        print(output)
        return finish(problem=f"the tests do not pass on the original module (pytest exit {status})")
    for variant in sorted((HERE / "equivalent").glob("*.py")):
        status, output = run_with(variant)
        if status != 0:
            print(output)
            return finish(problem=f"the tests fail on {variant.stem}, a rewrite that behaves the same")
    mutants = sorted((HERE / "mutants").glob("*.py"))
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        statuses = list(pool.map(lambda m: run_with(m)[0], mutants))
    survived = [m.stem for m, s in zip(mutants, statuses) if s == 0]
    killed = len(mutants) - len(survived)
    for m, s in zip(mutants, statuses):
        print(f"{m.stem}: {'survived' if s == 0 else 'killed'}")
    reward = 1 if killed >= THRESHOLD * len(mutants) else 0
    return finish(reward=reward, killed=killed, mutants=len(mutants), survived=survived)


if __name__ == "__main__":
    sys.exit(main())
